// Command kubectl-wrapup is the kubectl plugin for wrapup (`kubectl wrapup`):
// it tries a CompletionRule on a trigger object offline (eval), checks rule
// files before they are applied (lint), and says what wrapup does with a live
// AppWrapper and why (explain). It compiles and evaluates rules with the
// controller's own code, so its answers are the controller's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // a rule does not compile, an evaluation failed, lint found errors, the cluster could not be read
	exitUsage = 2
)

const usage = `kubectl wrapup: try, check and explain wrapup's CompletionRules.

Usage:
  kubectl wrapup eval -f RULE.yaml --trigger OBJECT.yaml [--appwrapper AW.yaml] [--name RULE]
      Evaluate a rule against a trigger object offline, as the controller
      does: the outcome, the message, the CEL cost, which expressions were
      built-in, and what the rule does then. The trigger's kind comes from
      the object's apiVersion and kind.

  kubectl wrapup lint -f FILE_OR_DIR [-f FILE_OR_DIR ...]
      Check every CompletionRule in the *.yaml and *.yml files (folders are
      walked; multi-document files are fine; other kinds are skipped): the
      expressions compile, the API server would accept the rule, and no part
      of it is unreachable. Errors fail the run; warnings only print.

  kubectl wrapup explain APPWRAPPER [-n NAMESPACE] [--kubeconfig FILE] [--context NAME]
      Say what wrapup does with a live AppWrapper, and why: which rules
      match and which wins, the trigger, its evaluation, the recorded
      outcome, and what happens next and when. Read-only. For an AppWrapper
      that is gone, its CompletionRecord: how its run ended.

  kubectl wrapup history [-n NAMESPACE | -A] [-l SELECTOR] [--appwrapper NAME]
      List the finished runs wrapup recorded (CompletionRecords), the newest
      first: the AppWrapper, the outcome, the rule, the action, when, and
      the message. Same as kubectl get completionrecords, newest first.

Exit status: 0 on success; 1 when a rule does not compile, an evaluation
fails, lint finds an error or the cluster cannot be read; 2 on a usage error.
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run runs one command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "eval":
		return runEval(ctx, args[1:], stdout, stderr)
	case "lint":
		return runLint(args[1:], stdout, stderr)
	case "explain":
		return runExplain(ctx, args[1:], stdout, stderr)
	case "history":
		return runHistory(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "error: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

// newFlagSet makes a flag set whose help goes to stderr under the command's
// usage line.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseInterspersed parses flags that may come after positional arguments,
// as kubectl allows (`explain NAME -n ns`), which the flag package alone
// does not. It returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }

func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// usageError reports a bad command line: the flag package has already
// printed the problem for its own errors.
func usageError(fs *flag.FlagSet, stderr io.Writer, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var pe parseError
	if errors.As(err, &pe) {
		fmt.Fprintf(stderr, "error: %v\n", err)
		fs.Usage()
	}
	return exitUsage
}

// parseError is a command-line error found after flag parsing.
type parseError struct{ msg string }

func (e parseError) Error() string { return e.msg }

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("eval", "kubectl wrapup eval -f RULE.yaml --trigger OBJECT.yaml [--appwrapper AW.yaml] [--name RULE]", stderr)
	var ruleFile, triggerFile, awFile, name string
	fs.StringVar(&ruleFile, "f", "", "File with the CompletionRule (shorthand for --filename).")
	fs.StringVar(&ruleFile, "filename", "", "File with the CompletionRule.")
	fs.StringVar(&triggerFile, "trigger", "", "File with the trigger object, status included (e.g. kubectl get job NAME -o yaml).")
	fs.StringVar(&awFile, "appwrapper", "", "File with the AppWrapper, for expressions over appWrapper (default: an empty object).")
	fs.StringVar(&name, "name", "", "The rule to evaluate, when the file holds several.")
	pos, err := parseInterspersed(fs, args)
	switch {
	case err != nil:
		return usageError(fs, stderr, err)
	case len(pos) > 0:
		return usageError(fs, stderr, parseError{"eval takes no arguments, only flags: " + strings.Join(pos, " ")})
	case ruleFile == "" || triggerFile == "":
		return usageError(fs, stderr, parseError{"eval needs -f RULE.yaml and --trigger OBJECT.yaml"})
	}

	rules, docs, err := loadRules([]string{ruleFile})
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFail
	}
	rule, doc, err := pickRule(rules, docs, name)
	if err != nil {
		fmt.Fprintf(stderr, "error: %s: %v\n", ruleFile, err)
		return exitFail
	}
	trigger, gvk, err := loadObject(triggerFile)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFail
	}
	var appWrapper map[string]any
	if awFile != "" {
		var awGVK schema.GroupVersionKind
		appWrapper, awGVK, err = loadObject(awFile)
		if err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			return exitFail
		}
		if awGVK.Kind != "AppWrapper" {
			fmt.Fprintf(stderr, "error: %s holds a %s, not an AppWrapper\n", awFile, awGVK.Kind)
			return exitFail
		}
	}
	rep, err := evaluate(ctx, rule, trigger, gvk, appWrapper)
	if err != nil {
		printCompileError(stderr, doc.Where(), rule.Name, err)
		return exitFail
	}
	rep.print(stdout)
	if rep.Err != nil {
		fmt.Fprintf(stderr, "error: %v (the controller takes the trigger as not finished)\n", rep.Err)
		return exitFail
	}
	return exitOK
}

func runLint(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lint", "kubectl wrapup lint -f FILE_OR_DIR [-f FILE_OR_DIR ...]", stderr)
	var paths stringsFlag
	fs.Var(&paths, "f", "A file or folder of CompletionRules; repeatable (shorthand for --filename).")
	fs.Var(&paths, "filename", "A file or folder of CompletionRules; repeatable.")
	pos, err := parseInterspersed(fs, args)
	switch {
	case err != nil:
		return usageError(fs, stderr, err)
	case len(pos) > 0:
		return usageError(fs, stderr, parseError{"lint takes files and folders with -f, not as arguments: " + strings.Join(pos, " ")})
	case len(paths) == 0:
		return usageError(fs, stderr, parseError{"lint needs -f FILE_OR_DIR"})
	}
	docs, files, err := readDocuments(paths)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFail
	}
	findings, rules := lintDocuments(docs)
	if printLint(stdout, findings, rules, files) > 0 {
		return exitFail
	}
	return exitOK
}
