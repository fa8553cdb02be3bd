package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
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

func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("explain", "kubectl wrapup explain APPWRAPPER [-n NAMESPACE] [--kubeconfig FILE] [--context NAME]", stderr)
	var namespace, kubeconfig, kubecontext string
	fs.StringVar(&namespace, "n", "", "Namespace of the AppWrapper (shorthand for --namespace; default: the context's namespace).")
	fs.StringVar(&namespace, "namespace", "", "Namespace of the AppWrapper (default: the context's namespace).")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).")
	fs.StringVar(&kubecontext, "context", "", "The kubeconfig context to use.")
	pos, err := parseInterspersed(fs, args)
	switch {
	case err != nil:
		return usageError(fs, stderr, err)
	case len(pos) != 1:
		return usageError(fs, stderr, parseError{"explain takes one AppWrapper name, got: " + strings.Join(pos, " ")})
	}
	c, ns, err := newClient(kubeconfig, kubecontext, namespace)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFail
	}
	ex, err := gc.Explain(ctx, c, nil, types.NamespacedName{Namespace: ns, Name: pos[0]}, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFail
	}
	fmt.Fprint(stdout, ex.String())
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
