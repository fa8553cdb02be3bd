package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc"
)

// requestTimeout bounds each request to the API server, so that an
// unreachable cluster fails the command rather than hanging it.
const requestTimeout = 30 * time.Second

// clusterFlags are the flags that pick the cluster and the namespace.
type clusterFlags struct{ namespace, kubeconfig, context string }

// add registers them on fs; of says what the namespace is of.
func (f *clusterFlags) add(fs *flag.FlagSet, of string) {
	fs.StringVar(&f.namespace, "n", "", "Namespace of the "+of+" (shorthand for --namespace; default: the context's namespace).")
	fs.StringVar(&f.namespace, "namespace", "", "Namespace of the "+of+" (default: the context's namespace).")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).")
	fs.StringVar(&f.context, "context", "", "The kubeconfig context to use.")
}

// client connects to the cluster they pick, or says why it cannot.
func (f *clusterFlags) client(stderr io.Writer) (client.Client, string, bool) {
	c, ns, err := newClient(f.kubeconfig, f.context, f.namespace)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return nil, "", false
	}
	return c, ns, true
}

func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("explain", "kubectl wrapup explain APPWRAPPER [-n NAMESPACE] [--kubeconfig FILE] [--context NAME]", stderr)
	var cf clusterFlags
	cf.add(fs, "AppWrapper")
	pos, err := parseInterspersed(fs, args)
	switch {
	case err != nil:
		return usageError(fs, stderr, err)
	case len(pos) != 1:
		return usageError(fs, stderr, parseError{"explain takes one AppWrapper name, got: " + strings.Join(pos, " ")})
	}
	c, ns, ok := cf.client(stderr)
	if !ok {
		return exitFail
	}
	ex, err := gc.Explain(ctx, c, nil, types.NamespacedName{Namespace: ns, Name: pos[0]}, time.Now())
	if apierrors.IsNotFound(err) {
		// Gone: its CompletionRecord says how its run ended.
		records, lerr := gc.Records(ctx, c, ns, pos[0], nil)
		if lerr == nil && len(records) > 0 {
			fmt.Fprint(stdout, gc.DescribeRecord(&records[0]))
			if len(records) > 1 {
				fmt.Fprintf(stdout, "            %d earlier run(s) of an AppWrapper of this name: kubectl wrapup history -n %s\n", len(records)-1, ns)
			}
			return exitOK
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFail
	}
	fmt.Fprint(stdout, ex.String())
	return exitOK
}

func runHistory(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("history", "kubectl wrapup history [-n NAMESPACE | -A] [-l SELECTOR] [--appwrapper NAME] [--kubeconfig FILE] [--context NAME]", stderr)
	var cf clusterFlags
	var selector, appWrapper string
	var all bool
	cf.add(fs, "runs")
	fs.BoolVar(&all, "A", false, "Runs of every namespace (shorthand for --all-namespaces).")
	fs.BoolVar(&all, "all-namespaces", false, "Runs of every namespace.")
	fs.StringVar(&selector, "l", "", "Label selector over the records' labels: the AppWrappers' own, and wrapup.dev/outcome, wrapup.dev/rule, wrapup.dev/appwrapper (shorthand for --selector).")
	fs.StringVar(&selector, "selector", "", "Label selector over the records' labels.")
	fs.StringVar(&appWrapper, "appwrapper", "", "Only the runs of the AppWrapper of this name.")
	pos, err := parseInterspersed(fs, args)
	switch {
	case err != nil:
		return usageError(fs, stderr, err)
	case len(pos) != 0:
		return usageError(fs, stderr, parseError{"history takes only flags, got: " + strings.Join(pos, " ")})
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return usageError(fs, stderr, parseError{"bad selector: " + err.Error()})
	}
	c, ns, ok := cf.client(stderr)
	if !ok {
		return exitFail
	}
	if all {
		ns = ""
	}
	records, err := gc.Records(ctx, c, ns, appWrapper, sel)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFail
	}
	if len(records) == 0 {
		fmt.Fprintln(stderr, "No finished runs recorded.")
		return exitOK
	}
	fmt.Fprint(stdout, gc.HistoryTable(records, all, time.Now()))
	return exitOK
}

// newClient makes a client for the cluster of a kubeconfig, as kubectl
// picks it, and returns the namespace to use.
func newClient(kubeconfig, kubecontext, namespace string) (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: kubecontext}
	if namespace != "" {
		overrides.Context.Namespace = namespace
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.Timeout = requestTimeout
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(awv1beta2.AddToScheme(scheme))
	utilruntime.Must(wrapupv1alpha1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("creating client: %w", err)
	}
	return c, ns, nil
}
