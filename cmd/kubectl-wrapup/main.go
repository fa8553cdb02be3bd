// Command kubectl-wrapup is the kubectl plugin for wrapup (`kubectl wrapup`):
// it tries a CompletionRule on a trigger object (eval), checks rule files
// before they are applied (lint), says what wrapup does with a live
// AppWrapper and why (explain), and lists the runs wrapup recorded
// (history). It compiles, validates, type-checks and evaluates rules with
// the controller's own code and the API server's validators, so its
// answers are the controller's.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // lint found errors, a rule does not compile, an evaluation failed, the cluster could not be read
	exitUsage = 2 // the command line is wrong
)

// version is the wrapup release the plugin is built from; make release sets
// it (-ldflags "-X main.version=v0.4.0"); otherwise the module's version.
var version = ""

func wrapupVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// failure is an error that exits with code (1); a nil err was printed.
type failure struct {
	code int
	err  error
}

func (f *failure) Error() string {
	if f.err == nil {
		return fmt.Sprintf("exit status %d", f.code)
	}
	return f.err.Error()
}

// failed is a failure (exit 1) that says err.
func failed(format string, args ...any) error {
	return &failure{code: exitFail, err: fmt.Errorf(format, args...)}
}

// quietly is a failure whose reason was printed.
func quietly(code int) error { return &failure{code: code} }

func main() {
	os.Exit(run(context.Background(), os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}

// run runs one command line and returns the exit code. Errors of the
// command line (unknown commands and flags, wrong arguments) exit 2;
// findings and failures exit 1.
func run(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	root := newRootCommand(streams)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var f *failure
	if errors.As(err, &f) {
		if f.err != nil {
			fmt.Fprintf(streams.ErrOut, "error: %v\n", f.err)
		}
		return f.code
	}
	fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
	if cmd != nil {
		fmt.Fprintf(streams.ErrOut, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return exitUsage
}

const rootLong = `Try, check and explain wrapup's CompletionRules.

wrapup finishes an AppWrapper when its trigger component finishes. This
plugin answers as the controller does: it compiles, validates, type-checks
and evaluates rules with the controller's code and the API server's own
validators.

Exit status: 0 when all is well; 1 when lint finds an error, a rule does not
compile, an evaluation fails or the cluster cannot be read; 2 when the
command line is wrong.`

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return newRoot(streams, nil)
}

// newRoot is the root command; its live commands read the cluster through
// cluster, or, when nil, through kubectl's flags.
func newRoot(streams genericiooptions.IOStreams, cluster clientGetter) *cobra.Command {
	cf := genericclioptions.NewConfigFlags(true)
	if cluster == nil {
		cluster = flagsCluster(cf)
	}
	root := &cobra.Command{
		Use:   "kubectl-wrapup",
		Short: "Try, check and explain wrapup's CompletionRules",
		Long:  rootLong,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl wrapup",
		},
		Version:       wrapupVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Run with no command: the help, as kubectl does.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
		Args: cobra.ArbitraryArgs,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetVersionTemplate(versionLine() + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	cf.AddFlags(root.PersistentFlags())
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		requestTimeoutSet = cmd.Flags().Changed("request-timeout")
	}
	// help TOPIC of no command is a usage error, not the general help.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(_ *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return fmt.Errorf("unknown help topic %q", strings.Join(args, " "))
			}
			return cmd.Help()
		},
	})
	root.AddCommand(
		newEvalCommand(cf, cluster, streams),
		newLintCommand(cf, streams),
		newExplainCommand(cf, cluster, streams),
		newPlanCommand(cf, cluster, streams),
		newHistoryCommand(cluster, streams),
		newVersionCommand(streams),
	)
	return root
}

func versionLine() string {
	return fmt.Sprintf("kubectl-wrapup %s (wrapup %s, API %s)", wrapupVersion(), wrapupVersion(), wrapupv1alpha1.GroupVersion)
}

func newVersionCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the wrapup release it matches",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(streams.Out, versionLine())
			return nil
		},
	}
}

// addSourceFlags adds kubectl's -f, -R and -k to cmd.
func addSourceFlags(cmd *cobra.Command, src *sources, what string) {
	cmd.Flags().StringSliceVarP(&src.Filenames, "filename", "f", nil, "File or folder of "+what+"; repeatable; - reads stdin.")
	cmd.Flags().BoolVarP(&src.Recursive, "recursive", "R", false, "Read the folders given with -f and every folder under them.")
	cmd.Flags().StringSliceVarP(&src.Kustomize, "kustomize", "k", nil, "A kustomization folder: read what it renders (kustomize build); repeatable.")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.MarkFlagDirname("kustomize")
}

// addOutputFlag adds -o, taking formats, which shell completion offers.
func addOutputFlag(cmd *cobra.Command, p *string, usage string, formats ...string) {
	cmd.Flags().StringVarP(p, "output", "o", "", usage)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput accepts an -o of formats, or none (the default output).
func checkOutput(output string, formats ...string) error {
	if output == "" || slices.Contains(formats, output) {
		return nil
	}
	last := len(formats) - 1
	return fmt.Errorf("unsupported output format %q: %s or %s", output, strings.Join(formats[:last], ", "), formats[last])
}

// examples indents a command's examples as kubectl does.
func examples(lines ...string) string {
	return "  " + strings.Join(lines, "\n  ")
}
