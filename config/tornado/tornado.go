// Package tornado reads processing trees written in Tornado's on-disk
// configuration layout (rules.d, version 2.0), so that Tornado users can
// bring their trees to Squall.
//
// The layout: version.json ({"version": "2.0"}) at the top; every
// directory below is a node holding filter.json, iterator.json or
// ruleset.json; a ruleset's rules are the files of its rules/ directory,
// in file name order; siblings are read in directory name order.
package tornado

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/squallhq/squall/config"
)

// ErrLayout classifies directories that do not follow the layout.
var ErrLayout = errors.New("invalid Tornado configuration layout")

// Read reads the tree whose top directory is root in fsys. The result is
// the implicit root filter with the top directory's nodes as children.
func Read(fsys fs.FS, root string) (*config.Node, error) {
	entries, err := fs.ReadDir(fsys, root)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	tree := config.NewRoot()
	hasVersion := false
	for _, e := range entries {
		if e.Name() == "version.json" {
			hasVersion = true
		}
	}
	if !hasVersion {
		if len(entries) == 0 {
			return tree, nil
		}
		return nil, fmt.Errorf("%w: %s has no version.json", ErrLayout, root)
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := readStrict(fsys, path.Join(root, "version.json"), &v); err != nil {
		return nil, err
	}
	if v.Version != "2.0" {
		return nil, fmt.Errorf("%w: %s: version %q is not supported (want 2.0; upgrade 1.0 trees with Tornado's rules-upgrade first)", ErrLayout, path.Join(root, "version.json"), v.Version)
	}
	if tree.Children, err = readChildren(fsys, root, entries, "version.json"); err != nil {
		return nil, err
	}
	return tree, nil
}

func readChildren(fsys fs.FS, dir string, entries []fs.DirEntry, self string) ([]*config.Node, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var nodes []*config.Node
	for _, e := range entries {
		p := path.Join(dir, e.Name())
		switch {
		case e.IsDir():
			n, err := readNode(fsys, p)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, n)
		case e.Name() == self:
		case strings.HasSuffix(e.Name(), ".json"):
			return nil, fmt.Errorf("%w: unexpected file %s", ErrLayout, p)
		}
	}
	return nodes, nil
}

type filterFile struct {
	Type        string          `json:"type"`
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Active      *bool           `json:"active"`
	Filter      json.RawMessage `json:"filter"`
	Target      *string         `json:"target"`
}

func readNode(fsys fs.FS, dir string) (*config.Node, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	has := map[string]bool{}
	for _, e := range entries {
		has[e.Name()] = !e.IsDir()
	}
	switch {
	case has["filter.json"]:
		return readBranch(fsys, dir, entries, "filter")
	case has["iterator.json"]:
		return readBranch(fsys, dir, entries, "iterator")
	case has["ruleset.json"]:
		return readRuleset(fsys, dir)
	}
	return nil, fmt.Errorf("%w: %s does not contain filter.json, iterator.json or ruleset.json", ErrLayout, dir)
}

func readBranch(fsys fs.FS, dir string, entries []fs.DirEntry, kind string) (*config.Node, error) {
	file := path.Join(dir, kind+".json")
	var f filterFile
	if err := readStrict(fsys, file, &f); err != nil {
		return nil, err
	}
	if f.Type != kind {
		return nil, fmt.Errorf("%s: type: %q, want %q", file, f.Type, kind)
	}
	for name, missing := range map[string]bool{"name": f.Name == nil, "description": f.Description == nil, "active": f.Active == nil} {
		if missing {
			return nil, fmt.Errorf("%s: %s: %w", file, name, config.ErrMissingField)
		}
	}
	n := &config.Node{Name: *f.Name, Description: *f.Description, Active: *f.Active}
	if kind == "filter" {
		if f.Target != nil {
			return nil, fmt.Errorf("%s: target: %w", file, config.ErrUnknownField)
		}
		if f.Filter == nil || bytes.Equal(bytes.TrimSpace(f.Filter), []byte("null")) {
			return nil, fmt.Errorf("%s: filter: %w (use {} to match every event)", file, config.ErrMissingField)
		}
		n.Kind = config.KindFilter
		op, err := config.DecodeOperator(f.Filter)
		if err != nil {
			return nil, fmt.Errorf("%s: filter: %w", file, err)
		}
		n.Filter = op
	} else {
		if f.Filter != nil {
			return nil, fmt.Errorf("%s: filter: %w", file, config.ErrUnknownField)
		}
		if f.Target == nil {
			return nil, fmt.Errorf("%s: target: %w", file, config.ErrMissingField)
		}
		n.Kind, n.Target = config.KindIterator, *f.Target
	}
	children, err := readChildren(fsys, dir, entries, kind+".json")
	if err != nil {
		return nil, err
	}
	n.Children = children
	return n, nil
}

func readRuleset(fsys fs.FS, dir string) (*config.Node, error) {
	file := path.Join(dir, "ruleset.json")
	var f struct {
		Type string  `json:"type"`
		Name *string `json:"name"`
	}
	if err := readStrict(fsys, file, &f); err != nil {
		return nil, err
	}
	if f.Type != "ruleset" {
		return nil, fmt.Errorf("%s: type: %q, want \"ruleset\"", file, f.Type)
	}
	if f.Name == nil {
		return nil, fmt.Errorf("%s: name: %w", file, config.ErrMissingField)
	}
	n := &config.Node{Kind: config.KindRuleset, Name: *f.Name}
	rulesDir := path.Join(dir, "rules")
	entries, err := fs.ReadDir(fsys, rulesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return n, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rulesDir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		p := path.Join(rulesDir, e.Name())
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		r, err := config.DecodeRule(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		n.Rules = append(n.Rules, r)
	}
	return n, nil
}

func readStrict(fsys fs.FS, name string, v any) error {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
