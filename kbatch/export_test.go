package kbatch

// ValidateWhole is Validate decompressing a compressed batch's records
// whole before it reads them: the reference its streaming read is
// checked against.
func ValidateWhole(records []byte, opts *ValidateOptions) (ValidateResult, error) {
	return validate(records, opts, true)
}
