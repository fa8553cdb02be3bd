package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wrapup-dev/wrapup/test/framework"
)

// transcriptDoc shows the demo's output; this test keeps it true.
const transcriptDoc = "docs/demo.md"

// TestDemo tells the demo's story on a cluster of its own and checks that
// docs/demo.md shows what it printed: the same lines, times, ages and
// generated names aside.
func TestDemo(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the suites with `make test`, which builds the local control plane (test/controlplane/build.sh)")
	}
	plugin := filepath.Join(t.TempDir(), "kubectl-wrapup")
	build := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-wrapup")
	build.Dir = framework.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-wrapup: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := Run(ctx, &out, plugin); err != nil {
		t.Fatalf("the demo failed: %v\nIt printed:\n%s", err, out.String())
	}
	var want, got []string
	for _, l := range transcript(t) {
		want = append(want, shape(l))
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		got = append(got, shape(l))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s's transcript differs from what the demo printed; it printed:\n%s", transcriptDoc, out.String())
	}
}

// shape is a line of the demo without what changes from run to run: times,
// ages, counts of milliseconds, the generated parts of pod names, and the
// padding of columns.
func shape(line string) string {
	line = regexp.MustCompile(`-[a-z0-9]{5,10}\b`).ReplaceAllString(line, "-x")
	// kubectl's ages and durations: 18s, 2m5s, 3h, as long as the run took.
	line = regexp.MustCompile(`\b[0-9]+[smhd]([0-9]+[smh])?\b`).ReplaceAllString(line, "0s")
	line = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`).ReplaceAllString(line, "0")
	return strings.Join(strings.Fields(line), " ")
}

// transcript is the demo's output as docs/demo.md shows it: the first
// ```text block after the heading "What `make demo` shows".
func transcript(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), transcriptDoc))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "What `make demo` shows")
	if !ok {
		t.Fatalf("%s: no heading \"What `make demo` shows\"", transcriptDoc)
	}
	_, rest, ok = strings.Cut(rest, "```text\n")
	if !ok {
		t.Fatalf("%s: no ```text block after the heading", transcriptDoc)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s: the transcript's block does not end", transcriptDoc)
	}
	return strings.Split(strings.TrimSpace(block), "\n")
}
