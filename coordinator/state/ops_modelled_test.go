package state

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// opTypes are the ops the model test (TestCoreModel) models.
var opTypes = []Op{
	&CreateOp{}, &DeleteTopicOp{}, &CommitOp{}, &DeleteRecordsOp{}, &InitProducerIDOp{}, &RetentionOp{},
	&ObjectsDeletedOp{}, &ACLCreateOp{}, &ACLDeleteOp{}, &AddPartitionsOp{}, &AlterTopicOp{}, &CompactOp{},
	&CommitOffsetsOp{}, &DeleteOffsetsOp{}, &ClaimGroupOp{}, &PutGroupMetadataOp{}, &KnownKeysOp{}, &ReceiveOp{},
	&RegisterRemoteOp{}, &ScramOp{}, &ClientQuotasOp{}, &TxnRequestOp{}, &TxnExpireOp{}, &PartitionTxnsOp{}, &TxnListOp{},
}

// packageOps parses the package's own source files and returns the name
// of every struct type that embeds BaseOp (an op), and the constants of
// type TxnOp (the kinds of TxnRequestOp).
func packageOps(t *testing.T) (ops, txnKinds []string) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			var constType string
			for _, spec := range gd.Specs {
				switch spec := spec.(type) {
				case *ast.TypeSpec:
					st, ok := spec.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, field := range st.Fields.List {
						if id, ok := field.Type.(*ast.Ident); ok && len(field.Names) == 0 && id.Name == "BaseOp" {
							ops = append(ops, spec.Name.Name)
						}
					}
				case *ast.ValueSpec:
					if gd.Tok != token.CONST {
						continue
					}
					switch id, ok := spec.Type.(*ast.Ident); {
					case ok:
						constType = id.Name
					case spec.Type != nil || len(spec.Values) > 0:
						constType = "" // another type, or untyped
					}
					if constType == "TxnOp" {
						for _, n := range spec.Names {
							txnKinds = append(txnKinds, n.Name)
						}
					}
				}
			}
		}
	}
	slices.Sort(ops)
	slices.Sort(txnKinds)
	return ops, txnKinds
}

// TestEveryOpModelled fails if an op type of the package (a struct that
// embeds BaseOp), or a kind of TxnRequestOp, has no model: it is not in
// opTypes, or no action of the model test decided one.
func TestEveryOpModelled(t *testing.T) {
	ops, kinds := packageOps(t)
	if len(ops) < len(opTypes) || len(kinds) == 0 {
		t.Fatalf("found ops %v and kinds %v in the package's source: too few", ops, kinds)
	}
	var listed []string
	for _, o := range opTypes {
		listed = append(listed, reflect.TypeOf(o).Elem().Name())
	}
	slices.Sort(listed)
	if !slices.Equal(ops, listed) {
		t.Errorf("the package's ops are %v; the model test models %v", ops, listed)
	}
	if len(exercised) == 0 {
		t.Run("model", TestCoreModel) // when run alone
	}
	for _, name := range ops {
		if name == "TxnRequestOp" {
			continue
		}
		if exercised[name] == 0 {
			t.Errorf("no action of the model test decided a %s", name)
		}
	}
	for _, k := range kinds {
		found := false
		for op, name := range txnOpNames {
			if name == k {
				found = true
				if exercised["TxnRequestOp/"+name] == 0 {
					t.Errorf("no action of the model test decided a TxnRequestOp of kind %s (%d)", k, op)
				}
			}
		}
		if !found {
			t.Errorf("TxnOp %s has no model (txnOpNames)", k)
		}
	}
}
