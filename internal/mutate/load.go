package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// listed is what `go list -export -json` says of a package.
type listed struct {
	ImportPath string
	Dir        string
	Name       string
	GoFiles    []string
	Export     string
}

// goList lists the packages (and, with deps, everything they import) with
// their export data, built by the go command as a compile would.
func goList(root string, deps bool, pkgs ...string) (map[string]*listed, error) {
	args := []string{"list", "-e", "-export", "-json=ImportPath,Dir,Name,GoFiles,Export"}
	if deps {
		args = append(args, "-deps")
	}
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	m := map[string]*listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		m[p.ImportPath] = &p
	}
	return m, nil
}

// pkgSchema is one mutated package: its files' schemata.
type pkgSchema struct {
	target *target
	pkg    *listed
	files  []*fileSchema
	names  []string // the files' paths relative to the module root
	first  int      // the first mutant id
	end    int      // one past the last
}

// loadTarget parses and type-checks a target package (its export data
// stands in for its imports) and collects its sites, skipping the lines in
// skip (file → lines).
func loadTarget(root string, t *target, pkg *listed, all map[string]*listed, skip map[string]map[int]bool) (*pkgSchema, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	var names []string
	for _, name := range pkg.GoFiles {
		if t.files != nil && !slices.Contains(t.files, name) {
			continue
		}
		path := filepath.Join(pkg.Dir, name)
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		names = append(names, name)
	}
	// Type-check the whole package (files not mutated included).
	var others []*ast.File
	for _, name := range pkg.GoFiles {
		if !slices.Contains(names, name) {
			f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
			if err != nil {
				return nil, err
			}
			others = append(others, f)
		}
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		p := all[path]
		if p == nil || p.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p.Export)
	})}
	if _, err := conf.Check(pkg.ImportPath, fset, append(slices.Clone(files), others...), info); err != nil {
		return nil, fmt.Errorf("type-checking %s: %v", pkg.ImportPath, err)
	}
	ps := &pkgSchema{target: t, pkg: pkg}
	for i, f := range files {
		path := filepath.Join(pkg.Dir, names[i])
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, path)
		fs := &fileSchema{fset: fset, tf: fset.File(f.Pos()), file: f, src: src, info: info, skip: skip[rel]}
		if strings.HasPrefix(string(src), "// Code generated") {
			continue
		}
		fs.collect(f)
		ps.files = append(ps.files, fs)
		ps.names = append(ps.names, rel)
	}
	return ps, nil
}

// number assigns the package's mutant ids from next and returns its
// mutants.
func (ps *pkgSchema) number(next int) []Mutant {
	ps.first = next
	var out []Mutant
	for _, fs := range ps.files {
		next = fs.number(next)
	}
	ps.end = next
	for i, fs := range ps.files {
		out = append(out, fs.mutants(ps.target.name, ps.names[i], indexFuncs(fs, fs.file))...)
	}
	return out
}
