package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// document is one YAML (or JSON) document of a file.
type document struct {
	// File is the path it was read from ("-" for stdin; the folder for a
	// kustomization, whose documents are its rendered output).
	File string
	// Line is the 1-based line of its first content line; Start the line
	// its text starts at (before any comment that heads it).
	Line, Start int
	// Data is the document's text.
	Data []byte

	tree *kyaml.Node
}

// Where is "file:line", as compilers print positions.
func (d *document) Where() string { return fmt.Sprintf("%s:%d", d.File, d.Line) }

// At is "file:line:column" of the field at path ("spec.success",
// "spec.variables[1].expression"): of its value, or of the nearest part
// of the path the document has.
func (d *document) At(fieldPath string) string {
	line, col := d.position(fieldPath)
	return fmt.Sprintf("%s:%d:%d", d.File, line, col)
}

// walk follows fieldPath from the document's root, calling step with each
// node it reaches (the root first) and, for a mapping's value, its key; it
// returns the last node reached and whether the whole path was.
func (d *document) walk(fieldPath string, step func(n, key *kyaml.Node)) (*kyaml.Node, bool) {
	if d.tree == nil {
		var n kyaml.Node
		if err := kyaml.Unmarshal(d.Data, &n); err != nil || len(n.Content) == 0 {
			return nil, false
		}
		d.tree = n.Content[0]
	}
	n := d.tree
	step(n, nil)
	for _, part := range splitPath(fieldPath) {
		var next, key *kyaml.Node
		if i, err := strconv.Atoi(part); err == nil && n.Kind == kyaml.SequenceNode {
			if i < len(n.Content) {
				next = n.Content[i]
			}
		} else if n.Kind == kyaml.MappingNode {
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == part {
					key, next = n.Content[j], n.Content[j+1]
					break
				}
			}
		}
		if next == nil {
			return n, false
		}
		if next.Kind == kyaml.AliasNode && next.Alias != nil {
			next = next.Alias
		}
		n = next
		step(n, key)
	}
	return n, true
}

// nodeAt is the node of the field at path; nil when the document does not
// have it.
func (d *document) nodeAt(fieldPath string) *kyaml.Node {
	n, ok := d.walk(fieldPath, func(*kyaml.Node, *kyaml.Node) {})
	if !ok {
		return nil
	}
	return n
}

func (d *document) position(fieldPath string) (line, col int) {
	line, col = d.Line, 1
	n, _ := d.walk(fieldPath, func(n, key *kyaml.Node) {
		line, col = d.Start+n.Line-1, n.Column
		if key != nil && (n.Kind == kyaml.MappingNode || n.Kind == kyaml.SequenceNode) && n.Line != key.Line {
			// A block: point at its key.
			line, col = d.Start+key.Line-1, key.Column
		}
	})
	if n == nil {
		return line, col
	}
	switch {
	case n.Kind == kyaml.ScalarNode && n.Style&(kyaml.LiteralStyle|kyaml.FoldedStyle) != 0:
		// A block scalar starts on the line after its indicator.
		lines := strings.Split(string(d.Data), "\n")
		for i := n.Line; i < len(lines); i++ {
			if t := strings.TrimSpace(lines[i]); t != "" {
				return d.Start + i, len(lines[i]) - len(strings.TrimLeft(lines[i], " \t")) + 1
			}
		}
	case n.Anchor != "":
		// "&name value": the value.
		col += len(n.Anchor) + 2
	}
	return line, col
}

// splitPath splits "spec.variables[1].expression" into its parts.
func splitPath(p string) []string {
	p = strings.ReplaceAll(p, "[", ".")
	p = strings.ReplaceAll(p, "]", "")
	var out []string
	for _, s := range strings.Split(p, ".") {
		if s != "" {
			out = append(out, strings.Trim(s, `"`))
		}
	}
	return out
}

// splitDocuments splits a multi-document YAML stream on "---" lines and
// drops documents with nothing but comments and blank lines. Lines are
// counted here, rather than by a YAML decoder, so that every message can
// point into the file.
func splitDocuments(file string, data []byte) ([]*document, error) {
	var docs []*document
	var cur bytes.Buffer
	start, first, content := 1, 0, false
	flush := func(next int) {
		if content {
			docs = append(docs, &document{File: file, Line: first, Start: start, Data: bytes.Clone(cur.Bytes())})
		}
		cur.Reset()
		start, first, content = next, 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "---" || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "---\t") {
			flush(n + 1)
			continue
		}
		if t := strings.TrimSpace(line); !content && t != "" && !strings.HasPrefix(t, "#") {
			first, content = n, true
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	flush(0)
	return docs, nil
}

// sources are where rules and objects are read from, as kubectl takes
// them: -f files, folders or "-" (stdin), -R to walk folders, -k
// kustomization folders.
type sources struct {
	Filenames []string
	Recursive bool
	Kustomize []string
}

func (s sources) empty() bool { return len(s.Filenames) == 0 && len(s.Kustomize) == 0 }

// manifestFile says whether a folder's file is read: what kubectl reads.
func manifestFile(name string) bool {
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// files lists the manifest files of path (itself, if it is a file), sorted:
// the folder's own, or every one under it with recursive.
func files(path string, recursive bool) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var out []string
	err = filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != path && !recursive:
			return filepath.SkipDir
		case !d.IsDir() && manifestFile(p):
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		hint := ""
		if !recursive {
			hint = " (use -R to read its subfolders)"
		}
		return nil, fmt.Errorf("%s has no *.yaml, *.yml or *.json files%s", path, hint)
	}
	sort.Strings(out)
	return out, nil
}

// read reads every document of the sources; it also returns how many
// files (and kustomizations) it read.
func (s sources) read(stdin io.Reader) ([]*document, int, error) {
	var docs []*document
	n := 0
	for _, p := range s.Filenames {
		if p == "-" {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, 0, fmt.Errorf("reading stdin: %w", err)
			}
			d, err := splitDocuments("-", data)
			if err != nil {
				return nil, 0, err
			}
			docs = append(docs, d...)
			n++
			continue
		}
		fs, err := files(p, s.Recursive)
		if err != nil {
			return nil, 0, err
		}
		for _, f := range fs {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, 0, err
			}
			d, err := splitDocuments(f, data)
			if err != nil {
				return nil, 0, err
			}
			docs = append(docs, d...)
			n++
		}
	}
	for _, dir := range s.Kustomize {
		k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
		m, err := k.Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			return nil, 0, fmt.Errorf("kustomize %s: %w", dir, err)
		}
		out, err := m.AsYaml()
		if err != nil {
			return nil, 0, fmt.Errorf("kustomize %s: %w", dir, err)
		}
		d, err := splitDocuments(dir+" (kustomize build)", out)
		if err != nil {
			return nil, 0, err
		}
		docs = append(docs, d...)
		n++
	}
	return docs, n, nil
}

// object decodes a document as unstructured content, with integers as
// int64, as the API server's JSON decoding gives them: CEL and the
// validators tell int from double.
func (d *document) object() (map[string]any, error) {
	j, err := yaml.YAMLToJSON(d.Data)
	if err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(j, &obj); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	if obj == nil {
		return nil, errors.New("not an object")
	}
	return obj, nil
}

// typeOf reads a document's apiVersion and kind.
func typeOf(d *document) (metav1.TypeMeta, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(d.Data, &tm); err != nil {
		return tm, fmt.Errorf("parsing YAML: %w", err)
	}
	return tm, nil
}

// isRule says whether a document declares itself a CompletionRule, of any
// version: a wrong version is reported rather than skipped.
func isRule(tm metav1.TypeMeta) bool {
	return tm.Kind == "CompletionRule" && schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind).Group == wrapupv1alpha1.GroupVersion.Group
}

// decodeRule decodes a CompletionRule document; unknown fields are
// dropped (lint reports them with the API server's validators).
func decodeRule(d *document) (*wrapupv1alpha1.CompletionRule, error) {
	tm, err := typeOf(d)
	if err != nil {
		return nil, err
	}
	if tm.APIVersion != wrapupv1alpha1.GroupVersion.String() {
		return nil, fmt.Errorf("apiVersion %q: wrapup serves %s", tm.APIVersion, wrapupv1alpha1.GroupVersion)
	}
	rule := &wrapupv1alpha1.CompletionRule{}
	if err := yaml.Unmarshal(d.Data, rule); err != nil {
		return nil, fmt.Errorf("decoding CompletionRule: %w", err)
	}
	return rule, nil
}

// loadRules reads the CompletionRules of the sources, skipping documents
// of other kinds (a kustomization.yaml, a Namespace).
func loadRules(src sources, stdin io.Reader) ([]*wrapupv1alpha1.CompletionRule, []*document, error) {
	docs, _, err := src.read(stdin)
	if err != nil {
		return nil, nil, err
	}
	var rules []*wrapupv1alpha1.CompletionRule
	var ruleDocs []*document
	for _, d := range docs {
		tm, err := typeOf(d)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Where(), err)
		}
		if !isRule(tm) {
			continue
		}
		r, err := decodeRule(d)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Where(), err)
		}
		rules = append(rules, r)
		ruleDocs = append(ruleDocs, d)
	}
	return rules, ruleDocs, nil
}

// loadObject reads the one Kubernetes object in file ("-": stdin) as
// unstructured content.
func loadObject(file string, stdin io.Reader) (map[string]any, schema.GroupVersionKind, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, schema.GroupVersionKind{}, err
	}
	docs, err := splitDocuments(file, data)
	if err != nil {
		return nil, schema.GroupVersionKind{}, err
	}
	if len(docs) != 1 {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("%s holds %d documents: give it exactly one object", file, len(docs))
	}
	obj, err := docs[0].object()
	if err != nil {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("%s: %w", docs[0].Where(), err)
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion == "" || kind == "" {
		return nil, schema.GroupVersionKind{}, errors.New(docs[0].Where() + ": the object has no apiVersion or kind")
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("%s: %w", docs[0].Where(), err)
	}
	return obj, gv.WithKind(kind), nil
}
