package acl_test

import (
	"testing"

	"github.com/diskless-go/diskless/acl"
	"github.com/diskless-go/diskless/acl/acltest"
)

var (
	_ acltest.ResourceTypeAuthorizer = (*acl.Authorizer)(nil)
	_ acltest.ResourceTypeAuthorizer = (*acl.Linear)(nil)
)

// TestConformance runs the conformance suite against the Authorizer, and
// against the linear reference the model test holds it to.
func TestConformance(t *testing.T) {
	t.Run("Authorizer", func(t *testing.T) {
		acltest.TestAuthorizer(t, func(t *testing.T, opts acl.Options, bindings []acl.Binding) acltest.Authorizer {
			for _, b := range bindings {
				if err := b.Validate(); err != nil {
					t.Fatalf("the suite's binding %v: %v", b, err)
				}
			}
			a := acl.NewAuthorizer(opts)
			a.Set(bindings)
			return a
		})
	})
	t.Run("Linear", func(t *testing.T) {
		acltest.TestAuthorizer(t, func(t *testing.T, opts acl.Options, bindings []acl.Binding) acltest.Authorizer {
			return acl.NewLinear(opts, bindings)
		})
	})
}
