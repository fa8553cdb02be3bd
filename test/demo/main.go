// Command demo tells wrapup's main story on the local cluster of `make up`
// (package test/bed), with the commands an admin would type and their real
// output: a rule for llm-d benchmarks, two benchmark AppWrappers queued by
// Kueue for a GPU node that fits one, and the handoff of the GPUs when the
// first one's guidellm Job completes and wrapup deletes its AppWrapper. The
// scheduler binds the pods to a node that kwok runs; the Job, ReplicaSet and
// Deployment controllers make and finish them; nothing in the demo writes a
// pod's or a Job's status.
//
// `make demo` runs it. It prints the story on stdout; the cluster's own log
// (its processes and controllers) goes to -log. It needs KUBEBUILDER_ASSETS
// (the control plane's binaries, kubectl among them) and the built plugin.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wrapup-dev/wrapup/test/framework"
)

func main() {
	plugin := flag.String("plugin", filepath.Join(framework.RepoRoot(), "bin", "kubectl-wrapup"), "the kubectl-wrapup binary")
	logPath := flag.String("log", filepath.Join(os.TempDir(), "wrapup-demo.log"), "where the cluster's log goes")
	flag.Parse()

	story, err := storyAndLog(*logPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, story, *plugin); err != nil {
		fmt.Fprintf(story, "\ndemo: %v\nThe cluster's log: %s\n", err, *logPath)
		os.Exit(1)
	}
}

// storyAndLog points the process's stdout and stderr at the log file and
// returns the original stdout, for the story: the test framework writes its
// processes' and controllers' logs to stdout.
func storyAndLog(path string) (*os.File, error) {
	log, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating the log: %w", err)
	}
	fd, err := unix.Dup(int(os.Stdout.Fd()))
	if err != nil {
		return nil, fmt.Errorf("duplicating stdout: %w", err)
	}
	story := os.NewFile(uintptr(fd), "story")
	for _, std := range []*os.File{os.Stdout, os.Stderr} {
		if err := unix.Dup3(int(log.Fd()), int(std.Fd()), 0); err != nil {
			return nil, fmt.Errorf("redirecting to the log: %w", err)
		}
	}
	return story, nil
}
