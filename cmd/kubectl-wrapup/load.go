package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// document is one YAML document of a file.
type document struct {
	// File is the path it was read from.
	File string
	// Line is the 1-based line of its first content line, for messages
	// that point into the file.
	Line int
	// Data is the document's text.
	Data []byte
}

// Where is "file:line", as compilers print positions.
func (d document) Where() string { return fmt.Sprintf("%s:%d", d.File, d.Line) }

// splitDocuments splits a multi-document YAML stream on "---" lines and
// drops documents with nothing but comments and blank lines. Lines are
// counted here, rather than by a YAML decoder, so that every message can
// point at its document.
func splitDocuments(file string, data []byte) ([]document, error) {
	var docs []document
	var cur bytes.Buffer
	start, content := 0, false
	flush := func() {
		if content {
			docs = append(docs, document{File: file, Line: start, Data: bytes.Clone(cur.Bytes())})
		}
		cur.Reset()
		start, content = 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "---" || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "---\t") {
			flush()
			continue
		}
		if t := strings.TrimSpace(line); !content && t != "" && !strings.HasPrefix(t, "#") {
			start, content = n, true
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	flush()
	return docs, nil
}

// yamlFiles lists the *.yaml and *.yml files under path (itself, if it is a
// file), sorted, so that output is stable.
func yamlFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s has no *.yaml or *.yml files", path)
	}
	sort.Strings(files)
	return files, nil
}

// readDocuments reads every document of every YAML file under paths; it
// also returns how many files it read.
func readDocuments(paths []string) ([]document, int, error) {
	var docs []document
	n := 0
	for _, p := range paths {
		files, err := yamlFiles(p)
		if err != nil {
			return nil, 0, err
		}
		for _, f := range files {
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
	return docs, n, nil
}

// typeOf reads a document's apiVersion and kind.
func typeOf(d document) (metav1.TypeMeta, error) {
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

// decodeRule decodes a CompletionRule strictly: an unknown or misspelt
// field is an error, as kubectl's default server-side field validation
// makes it one.
func decodeRule(d document) (*wrapupv1alpha1.CompletionRule, error) {
	tm, err := typeOf(d)
	if err != nil {
		return nil, err
	}
	if tm.APIVersion != wrapupv1alpha1.GroupVersion.String() {
		return nil, fmt.Errorf("apiVersion %q: wrapup serves %s", tm.APIVersion, wrapupv1alpha1.GroupVersion)
	}
	rule := &wrapupv1alpha1.CompletionRule{}
	if err := yaml.UnmarshalStrict(d.Data, rule); err != nil {
		return nil, fmt.Errorf("decoding CompletionRule: %w", err)
	}
	return rule, nil
}

// loadRules reads the CompletionRules of the YAML files under paths,
// skipping documents of other kinds (a kustomization.yaml, a Namespace).
func loadRules(paths []string) ([]*wrapupv1alpha1.CompletionRule, []document, error) {
	docs, _, err := readDocuments(paths)
	if err != nil {
		return nil, nil, err
	}
	var rules []*wrapupv1alpha1.CompletionRule
	var ruleDocs []document
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

// loadObject reads the one Kubernetes object in file as unstructured
// content, with integers as int64, as the API server's JSON decoding gives
// them to the controller: CEL tells int from double.
func loadObject(file string) (map[string]any, schema.GroupVersionKind, error) {
	data, err := os.ReadFile(file)
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
	j, err := yaml.YAMLToJSON(docs[0].Data)
	if err != nil {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("%s: parsing YAML: %w", docs[0].Where(), err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(j, &obj); err != nil {
		return nil, schema.GroupVersionKind{}, fmt.Errorf("%s: not an object: %w", docs[0].Where(), err)
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
