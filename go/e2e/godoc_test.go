package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryExportedNameHasGodoc walks the module's packages (not its tests
// or testdata): every package has a package comment, and every exported
// name and every method of an exported type a doc comment.
func TestEveryExportedNameHasGodoc(t *testing.T) {
	fset := token.NewFileSet()
	packageDoc := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		packageDoc[dir] = packageDoc[dir] || file.Doc != nil
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && d.Doc == nil && exportedReceiver(d) {
					t.Errorf("%s: %s has no doc comment", fset.Position(d.Pos()), d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					checkSpec(t, fset, d, spec)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, ok := range packageDoc {
		if !ok {
			t.Errorf("%s has no package comment", dir)
		}
	}
}

// exportedReceiver is true for functions and for methods of exported types
// (an unexported type's methods are not in the docs).
func exportedReceiver(d *ast.FuncDecl) bool {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return true
	}
	typ := d.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	ident, ok := typ.(*ast.Ident)
	return ok && ident.IsExported()
}

func checkSpec(t *testing.T, fset *token.FileSet, d *ast.GenDecl, spec ast.Spec) {
	switch s := spec.(type) {
	case *ast.TypeSpec:
		if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
			t.Errorf("%s: type %s has no doc comment", fset.Position(s.Pos()), s.Name.Name)
		}
	case *ast.ValueSpec:
		for _, name := range s.Names {
			// A name in a documented group counts as documented, as godoc
			// shows the group's comment.
			if name.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
				t.Errorf("%s: %s has no doc comment", fset.Position(name.Pos()), name.Name)
			}
		}
	}
}
