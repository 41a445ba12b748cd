package acltest

import "testing"

// TestScenariosValid: every binding of the suite is one Kafka creates,
// as TestAuthorizer promises the implementations it opens.
func TestScenariosValid(t *testing.T) {
	for _, sc := range Scenarios() {
		for _, b := range sc.Bindings {
			if err := b.Validate(); err != nil {
				t.Errorf("%s: %v: %v", sc.Name, b, err)
			}
		}
		if len(sc.Checks)+len(sc.TypeChecks) == 0 {
			t.Errorf("%s: no checks", sc.Name)
		}
	}
}
