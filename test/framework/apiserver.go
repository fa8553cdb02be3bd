package framework

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
)

// ControllerUser is the user name wrapup acts as in the suites, as the API
// server's audit log names it.
const ControllerUser = "system:serviceaccount:" + ControllerNamespace + ":" + ControllerServiceAccount

// auditPolicy logs, at Metadata level (who, what, which object, the
// response code; no bodies), only the writes to AppWrappers and
// CompletionRecords, and the creations of Jobs: the audit log is then a
// complete and small record of every deletion, of every run's record and of
// every benchmark started. Deletions are
// logged when received too, so that a deletion the server accepted but
// never answered would show.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
  verbs: ["delete", "deletecollection"]
  resources:
  - group: workload.codeflare.dev
    resources: ["appwrappers"]
- level: Metadata
  verbs: ["create", "update", "patch"]
  omitStages: ["RequestReceived"]
  resources:
  - group: workload.codeflare.dev
    resources: ["appwrappers"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  omitStages: ["RequestReceived"]
  resources:
  - group: wrapup.dev
    resources: ["completionrecords"]
- level: Metadata
  verbs: ["create"]
  omitStages: ["RequestReceived"]
  resources:
  - group: batch
    resources: ["jobs"]
- level: None
`

// configureAPIServer sets the kube-apiserver flags the suites rely on,
// before envtest starts it: a certificate folder that survives a restart,
// a quick graceful shutdown and, if asked for, the audit log.
func (f *Framework) configureAPIServer() {
	ginkgo.GinkgoHelper()
	api := f.env.ControlPlane.GetAPIServer()
	// envtest removes a certificate folder it made itself when the API
	// server stops, and makes new certificates (a new CA) on the next
	// start; in a folder of the framework's own they are kept, so that a
	// restarted API server is the same server to every client.
	api.CertDir = filepath.Join(f.tmpDir, "apiserver")
	gomega.Expect(os.MkdirAll(api.CertDir, 0o700)).To(gomega.Succeed())

	// On SIGTERM the server stops accepting requests (answering 429 with
	// Retry-After), lets the requests in flight finish and then closes
	// the remaining connections (watches) after 2s. Without it, it waits
	// up to the request timeout (60s) for the watches that clients keep
	// open, past envtest's stop timeout.
	api.Configure().Set("shutdown-send-retry-after", "true")

	if !f.AuditLog {
		return
	}
	policy := filepath.Join(f.tmpDir, "audit-policy.yaml")
	gomega.Expect(os.WriteFile(policy, []byte(auditPolicy), 0o600)).To(gomega.Succeed())
	f.auditLog = filepath.Join(f.tmpDir, "audit.log")
	api.Configure().
		// The log backend writes each event as its request completes
		// (blocking mode), and a restarted server appends to the file.
		Set("audit-policy-file", policy).
		Set("audit-log-path", f.auditLog).
		Set("audit-log-format", "json")
}

// StopAPIServer stops kube-apiserver gracefully (every request it accepted
// is answered and audited); etcd and every other process keep running.
// Until StartAPIServer, the errors that the controllers log are the
// outage's and are kept out of the ErrorLog's checks.
func (f *Framework) StopAPIServer() {
	ginkgo.GinkgoHelper()
	f.Errors.beginOutage()
	start := time.Now()
	gomega.Expect(f.env.ControlPlane.GetAPIServer().Stop()).To(gomega.Succeed(), "stopping kube-apiserver")
	ginkgo.GinkgoLogr.Info("kube-apiserver stopped", "took", time.Since(start).Round(time.Millisecond).String())
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same address, certificates, etcd and audit log, so that every client
// config made before keeps working, and waits until it is ready.
func (f *Framework) StartAPIServer() {
	ginkgo.GinkgoHelper()
	start := time.Now()
	api := f.env.ControlPlane.GetAPIServer()
	// The second start is envtest's usual one: the ports are already
	// chosen, the certificates found in CertDir, and the client CA (kept
	// in memory) written again.
	gomega.Expect(api.Start()).To(gomega.Succeed(), "starting kube-apiserver again")
	clientset, err := kubernetes.NewForConfig(f.cfg)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	// Healthy (what envtest waits for) is not yet ready: wait until every
	// readiness check passes (informers synced, RBAC loaded).
	gomega.Eventually(func(ctx context.Context) error {
		_, err := clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}).WithTimeout(time.Minute).WithPolling(100*time.Millisecond).WithContext(context.Background()).Should(gomega.Succeed(), "kube-apiserver ready again")
	f.Errors.endOutage()
	ginkgo.GinkgoLogr.Info("kube-apiserver started again", "took", time.Since(start).Round(time.Millisecond).String())
}

// RestartAPIServer stops kube-apiserver, runs whileDown, and starts it
// again (see StopAPIServer and StartAPIServer).
//
// Informers come back on their own, with client-go's reflector backoff
// (0.8s doubling up to 30s, times a random 1 to 2, forgotten only after two
// minutes without a failure): after one restart they resume within seconds,
// but restarts less than two minutes apart leave them stale for a minute or
// more, longer than the suites' waits.
func (f *Framework) RestartAPIServer(whileDown func()) {
	ginkgo.GinkgoHelper()
	f.StopAPIServer()
	// Started again even when whileDown fails, for the specs that follow.
	defer f.StartAPIServer()
	if whileDown != nil {
		whileDown()
	}
}

// AuditedRequest is one request the audit log recorded.
type AuditedRequest struct {
	AuditID types.UID
	// Verb is the API verb: "delete", "patch", "update", "create".
	Verb string
	// User is the user the request acted as: the impersonated user if
	// any, else the authenticated one.
	User      string
	Namespace string
	Name      string
	// Code is the response code; 0 when the log has no response for the
	// request (received, never answered).
	Code     int32
	Received time.Time
}

// Succeeded says whether the server answered with a 2xx code.
func (r AuditedRequest) Succeeded() bool { return r.Code >= 200 && r.Code < 300 }

func (r AuditedRequest) String() string {
	return fmt.Sprintf("%s %s/%s by %s: %d at %s (audit ID %s)", r.Verb, r.Namespace, r.Name, r.User,
		r.Code, r.Received.Format("15:04:05.000000"), r.AuditID)
}

// AuditedAppWrapperRequests returns the requests with verb on AppWrappers
// in namespace that user made, in the order the server received them,
// from the API server's audit log (which the policy above limits to writes
// to AppWrappers). An empty user means any user.
func (f *Framework) AuditedAppWrapperRequests(verb, user, namespace string) []AuditedRequest {
	ginkgo.GinkgoHelper()
	return f.AuditedRequests("appwrappers", verb, user, namespace)
}

// AuditedRequests is AuditedAppWrapperRequests for resource (appwrappers,
// completionrecords, jobs: creations only).
func (f *Framework) AuditedRequests(resource, verb, user, namespace string) []AuditedRequest {
	ginkgo.GinkgoHelper()
	events := f.auditEvents()
	byID := map[types.UID]int{}
	var all []AuditedRequest
	for _, e := range events {
		if e.Verb != verb || e.ObjectRef == nil || e.ObjectRef.Resource != resource || e.ObjectRef.Subresource != "" ||
			e.ObjectRef.Namespace != namespace {
			continue
		}
		i, seen := byID[e.AuditID]
		if !seen {
			i = len(all)
			byID[e.AuditID] = i
			all = append(all, AuditedRequest{
				AuditID: e.AuditID, Verb: e.Verb, User: e.User.Username, Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name,
				Received: e.RequestReceivedTimestamp.Time,
			})
		}
		// The event of the RequestReceived stage is written before
		// impersonation is resolved; later stages name the impersonated
		// user.
		if e.ImpersonatedUser != nil {
			all[i].User = e.ImpersonatedUser.Username
		}
		switch e.Stage {
		case auditv1.StageResponseComplete, auditv1.StagePanic:
			all[i].Code = 500
			if e.ResponseStatus != nil {
				all[i].Code = e.ResponseStatus.Code
			}
		}
	}
	var out []AuditedRequest
	for _, r := range all {
		if user == "" || r.User == user {
			out = append(out, r)
		}
	}
	return out
}

// auditEvents parses the audit log written so far. A last line still
// being written is left out.
func (f *Framework) auditEvents() []auditv1.Event {
	ginkgo.GinkgoHelper()
	gomega.Expect(f.auditLog).NotTo(gomega.BeEmpty(), "the framework has no audit log: set Framework.AuditLog")
	data, err := os.ReadFile(f.auditLog)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "reading the audit log")
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var events []auditv1.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e auditv1.Event
		gomega.Expect(json.Unmarshal(line, &e)).To(gomega.Succeed(), "parsing an audit log line: %s", line)
		events = append(events, e)
	}
	gomega.Expect(sc.Err()).NotTo(gomega.HaveOccurred(), "reading the audit log")
	return events
}
