package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// exitOf is the exit code run gives for a command's error.
func exitOf(err error) int {
	var f *failure
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &f):
		return f.code
	}
	return exitUsage
}

// testStreams are streams over buffers, with an empty stdin.
func testStreams() (genericiooptions.IOStreams, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, &out, &errOut
}

// noCluster is a clientGetter for commands that must not read a cluster.
func noCluster(t *testing.T) clientGetter {
	return func() (client.Client, string, error) {
		t.Error("the cluster was read")
		return nil, "", errors.New("no cluster")
	}
}

// eval's Validate refuses what the command line refuses, with the same
// messages, and accepts each way of giving the rule and the trigger.
func TestEvalValidate(t *testing.T) {
	rule := sources{Filenames: []string{sample("benchmarks.yaml")}}
	tests := []struct {
		name    string
		o       evalOptions
		wantErr string
	}{
		{"no rule", evalOptions{triggerFile: "job.yaml"},
			"eval needs the rule: -f RULE.yaml or --rule NAME (one of them)"},
		{"two rules", evalOptions{src: rule, ruleName: "benchmarks", triggerFile: "job.yaml"},
			"eval needs the rule: -f RULE.yaml or --rule NAME (one of them)"},
		{"no trigger", evalOptions{ruleName: "benchmarks"},
			"eval needs the trigger: --trigger OBJECT.yaml, or --appwrapper [NAMESPACE/]NAME to read it from the cluster"},
		{"an AppWrapper file gives no trigger", evalOptions{ruleName: "benchmarks", appWrapper: "aw.yaml"},
			"eval needs the trigger: --trigger OBJECT.yaml, or --appwrapper [NAMESPACE/]NAME to read it from the cluster"},
		{"two triggers", evalOptions{ruleName: "benchmarks", triggerFile: "job.yaml", appWrapper: "team-a/sweep"},
			"--trigger and a live --appwrapper both give the trigger: choose one"},
		{"an output format eval does not have", evalOptions{src: rule, triggerFile: "job.yaml", output: "wide"},
			`unsupported output format "wide": json or yaml`},
		{"stdin twice", evalOptions{src: sources{Filenames: []string{"-"}}, triggerFile: "-"},
			"stdin (-) can give only one of -f, --trigger and --appwrapper"},
		{"a name of three parts", evalOptions{ruleName: "benchmarks", appWrapper: "a/b/c"},
			`--appwrapper "a/b/c": want NAME or NAMESPACE/NAME`},
		{"files", evalOptions{src: rule, triggerFile: "job.yaml", appWrapper: "aw.yaml", output: "yaml"}, ""},
		{"the cluster", evalOptions{ruleName: "benchmarks", appWrapper: "team-a/sweep"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Complete(nil)
			err := o.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("Validate: %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// eval --rule NAME --appwrapper [NS/]NAME, run as its Options on a cluster
// a test gives: the cluster's rule on the AppWrapper's live Job, and the
// controller's verdict under that rule.
func TestEvalRunOnAGivenCluster(t *testing.T) {
	for _, aw := range []string{"bench/sweep", "sweep"} { // sweep: in the getter's namespace
		streams, out, errOut := testStreams()
		o := newEvalOptions(genericclioptions.NewConfigFlags(true), fakeCluster(t, true), streams)
		o.ruleName, o.appWrapper = "jobs", aw
		o.Complete(nil)
		if err := o.Validate(); err != nil {
			t.Fatalf("--appwrapper %s: Validate: %v", aw, err)
		}
		if err := o.Run(context.Background()); err != nil {
			t.Fatalf("--appwrapper %s: Run: %v\n%s", aw, err, errOut)
		}
		for _, want := range []string{
			"rule:         jobs\n",
			"trigger:      batch/v1 Job load\n",
			"outcome:      Succeeded\n",
			"message:      CompletionsReached: Reached expected number of succeeded pods\n",
			"then:         Delete: the trigger Succeeded: rule jobs deletes the AppWrapper now",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("--appwrapper %s: stdout lacks %q:\n%s", aw, want, out)
			}
		}
		if errOut.Len() > 0 {
			t.Errorf("--appwrapper %s: stderr: %s", aw, errOut)
		}
	}

	// -o json: one Evaluation object, with the verdict instead of "then".
	streams, out, _ := testStreams()
	o := newEvalOptions(genericclioptions.NewConfigFlags(true), fakeCluster(t, true), streams)
	o.ruleName, o.appWrapper, o.output = "jobs", "bench/sweep", "json"
	o.Complete(nil)
	if err := o.Run(context.Background()); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	var ev struct {
		Kind, Rule, Outcome, Verdict, Then string
		Trigger                            struct{ Kind, Name string }
	}
	if err := json.Unmarshal(out.Bytes(), &ev); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if ev.Kind != "Evaluation" || ev.Rule != "jobs" || ev.Outcome != "Succeeded" || ev.Verdict != "Delete" || ev.Then != "" ||
		ev.Trigger.Kind != "Job" || ev.Trigger.Name != "load" {
		t.Errorf("-o json: %+v\n%s", ev, out)
	}

	// What cannot be read fails with exit 1, saying what.
	for _, tc := range []struct{ rule, aw, wantErr string }{
		{"nope", "bench/sweep", "reading CompletionRule nope: "},
		{"jobs", "bench/gone", "reading appwrapper bench/gone: "},
		{"jobs", "bench/serving", "appwrapper bench/serving: "},
	} {
		streams, out, _ := testStreams()
		o := newEvalOptions(genericclioptions.NewConfigFlags(true), fakeCluster(t, true), streams)
		o.ruleName, o.appWrapper = tc.rule, tc.aw
		o.Complete(nil)
		err := o.Run(context.Background())
		if exitOf(err) != exitFail || !strings.HasPrefix(err.Error(), tc.wantErr) || out.Len() > 0 {
			t.Errorf("--rule %s --appwrapper %s: exit %d, error %v, stdout %q; want exit 1 and %q", tc.rule, tc.aw, exitOf(err), err, out, tc.wantErr)
		}
	}
}

// eval of files reads no cluster.
func TestEvalRunOffline(t *testing.T) {
	streams, out, errOut := testStreams()
	o := newEvalOptions(genericclioptions.NewConfigFlags(true), noCluster(t), streams)
	o.src.Filenames, o.triggerFile, o.appWrapper = []string{sample("benchmarks.yaml")}, td("job-failed.yaml"), td("appwrapper.yaml")
	o.Complete(nil)
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := o.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v\n%s", err, errOut)
	}
	if !strings.Contains(out.String(), "rule:         benchmarks\n") || !strings.Contains(out.String(), "outcome:      Failed\n") {
		t.Errorf("stdout:\n%s", out)
	}
}

// lint's Validate refuses what the command line refuses, with the same
// messages.
func TestLintValidate(t *testing.T) {
	tests := []struct {
		name    string
		o       lintOptions
		wantErr string
	}{
		{"no files", lintOptions{}, "lint needs -f FILENAME or -k DIR"},
		{"stdin twice", lintOptions{src: sources{Filenames: []string{"-", "rules/", "-"}}}, "stdin (-f -) can be read once"},
		{"an output format lint does not have", lintOptions{src: sources{Kustomize: []string{"config/rules"}}, output: "name"}, `unsupported output format "name": json or yaml`},
		{"files", lintOptions{src: sources{Filenames: []string{"-", "rules/"}}, output: "json"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("Validate: %q, want %q", got, tc.wantErr)
			}
		})
	}
}

// lint's Run prints the findings; warnings fail only with --strict.
func TestLintRun(t *testing.T) {
	for _, strict := range []bool{false, true} {
		streams, out, _ := testStreams()
		o := newLintOptions(genericclioptions.NewConfigFlags(true), streams)
		o.src.Filenames, o.strict = []string{td("lint/unreachable.yaml")}, strict
		err := o.Run(context.Background())
		want := exitOK
		if strict {
			want = exitFail
		}
		if exitOf(err) != want || !strings.HasSuffix(out.String(), "\n4 rules in 1 file: 0 errors, 5 warnings\n") {
			t.Errorf("strict %v: exit %d (%v), want %d\n%s", strict, exitOf(err), err, want, out)
		}
	}

	// -o json: the counts, and exit 1 on an error.
	streams, out, _ := testStreams()
	o := newLintOptions(genericclioptions.NewConfigFlags(true), streams)
	o.src.Filenames, o.output = []string{td("lint/schema-errors.yaml")}, "json"
	err := o.Run(context.Background())
	var res struct {
		Kind             string
		Errors, Warnings int
	}
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		t.Fatalf("-o json: %v\n%s", jerr, out)
	}
	if exitOf(err) != exitFail || res.Kind != "LintResult" || res.Errors != 5 || res.Warnings != 0 {
		t.Errorf("-o json: exit %d, %+v; want exit 1, 5 errors, 0 warnings\n%s", exitOf(err), res, out)
	}
}

// eval's --appwrapper completes the namespace's AppWrappers, --rule the
// cluster's CompletionRules; a cluster that cannot be read, nothing.
func TestCompleteEvalFlags(t *testing.T) {
	unreadable := func() (client.Client, string, error) { return nil, "", errors.New("no cluster") }
	for _, tc := range []struct {
		cluster clientGetter
		args    []string
		want    string
	}{
		{fakeCluster(t, true), []string{"--appwrapper", "sw"}, "sweep"},
		{fakeCluster(t, true), []string{"--appwrapper", ""}, "serving,sweep"},
		{fakeCluster(t, true), []string{"--rule", ""}, "jobs"},
		{fakeCluster(t, true), []string{"--rule", "j"}, "jobs"},
		{fakeCluster(t, true), []string{"--rule", "x"}, ""},
		{unreadable, []string{"--rule", ""}, ""},
		{unreadable, []string{"--appwrapper", ""}, ""},
	} {
		_, out, _ := runWith(t, tc.cluster, append([]string{"__complete", "eval"}, tc.args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		got, directive := lines[:len(lines)-1], lines[len(lines)-1]
		if strings.Join(got, ",") != tc.want || directive != ":4" {
			t.Errorf("eval %v: completions %q, directive %s; want %q and :4 (no file completion)", tc.args, got, directive, tc.want)
		}
	}
}

// -o completes to the formats each command takes, and to no file.
func TestCompleteOutputFormats(t *testing.T) {
	for cmd, want := range map[string]string{"eval": "json,yaml", "explain": "json,yaml", "history": "wide,json,yaml,name", "lint": "json,yaml", "plan": "json,yaml"} {
		_, out, _ := runWith(t, fakeCluster(t, true), "__complete", cmd, "-o", "")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		got, directive := lines[:len(lines)-1], lines[len(lines)-1]
		if strings.Join(got, ",") != want || directive != ":4" {
			t.Errorf("%s -o: completions %q, directive %s; want %q and :4 (no file completion)", cmd, got, directive, want)
		}
	}
}
