package decision

import (
	"fmt"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// PrebuiltWorkloadLabel names, on MultiKueue's copy on a worker cluster,
// the manager's Workload (Kueue's pkg/controller/constants).
const PrebuiltWorkloadLabel = "kueue.x-k8s.io/prebuilt-workload-name"

// Worker is what was read of the worker cluster that runs an AppWrapper
// MultiKueue dispatches (MultiKueueManaged): the copy there has the
// components, the triggers among them.
type Worker struct {
	// Cluster names the MultiKueueCluster the AppWrapper's Workload is
	// dispatched to (Workload.status.clusterName); "" while it is not.
	Cluster    string
	Workload   string                // the AppWrapper's Workload here, as its copy there names it; "" for none
	Problem    string                // why the worker could not be read; "" when it was
	AppWrapper *awv1beta2.AppWrapper // the one of the same name on the worker; nil for none
	// Finished: Kueue finished the Workload here, and MultiKueue removes
	// the copy there, whose last status the AppWrapper here keeps, and
	// copies FinishedReason, Succeeded or Failed, from the worker's.
	Finished       bool
	FinishedReason string
}

// WorkerInfo is what a decision read on a worker cluster, for people.
type WorkerInfo struct {
	Cluster string // the worker's name; "" when the AppWrapper is not dispatched
	// Problem says why the triggers there were not read, or why the copy
	// there is not taken as this AppWrapper's; "" when they were read.
	Problem string
	// CopyUID and CopyPhase are MultiKueue's copy's there, whose
	// components the triggers must be.
	CopyUID   string
	CopyPhase awv1beta2.AppWrapperPhase
}

// MultiKueueManaged says whether MultiKueue dispatches aw to a worker
// cluster (spec.managedBy kueue.x-k8s.io/multikueue): the AppWrapper
// controller there creates the components, for its copy. Deleting aw is
// the one way to finish it: MultiKueue then removes the copy and its
// Workload from the worker, and both quotas come back.
func MultiKueueManaged(aw *awv1beta2.AppWrapper) bool {
	return aw != nil && ptr.Deref(aw.Spec.ManagedBy, "") == kueue.MultiKueueControllerName
}

// componentsOwner is the AppWrapper that controls in.AppWrapper's
// components: itself, or its copy on the worker; nil for none, problem
// then says why, and unknown that the worker could not be read.
func componentsOwner(in Input) (owner *awv1beta2.AppWrapper, problem string, unknown bool) {
	aw := in.AppWrapper
	if !MultiKueueManaged(aw) {
		return aw, "", false
	}
	w := in.Worker
	switch {
	case w == nil && !deployed(aw):
		// Queued, or not yet started: the Workload's dispatch or its
		// status brings it back.
		return nil, fmt.Sprintf("MultiKueue has not started the AppWrapper on a worker cluster (it is %s): its components do not exist", phaseOrNone(aw.Status.Phase)), false
	case w == nil:
		return nil, "MultiKueue dispatches this AppWrapper, and its worker cluster was not read", true
	case w.Problem != "":
		return nil, w.Problem, true
	case w.Cluster == "":
		return nil, "MultiKueue has not dispatched the AppWrapper's Workload to a worker cluster (yet): its components do not exist", false
	case w.AppWrapper == nil:
		return nil, fmt.Sprintf("worker cluster %s has no copy of the AppWrapper (not created yet, or deleted)", w.Cluster), false
	case w.Workload == "" || w.AppWrapper.Labels[PrebuiltWorkloadLabel] != w.Workload:
		return nil, fmt.Sprintf("the AppWrapper of this name on worker cluster %s is not MultiKueue's copy of this one (its label %s is %q, this AppWrapper's Workload is %q): its components are not taken as this AppWrapper's",
			w.Cluster, PrebuiltWorkloadLabel, w.AppWrapper.Labels[PrebuiltWorkloadLabel], w.Workload), false
	case !w.AppWrapper.DeletionTimestamp.IsZero():
		return nil, fmt.Sprintf("the copy on worker cluster %s is being deleted", w.Cluster), false
	case !deployed(w.AppWrapper):
		return nil, fmt.Sprintf("the copy on worker cluster %s is %s: its components do not exist", w.Cluster, phaseOrNone(w.AppWrapper.Status.Phase)), false
	}
	return w.AppWrapper, "", false
}

// withCopyStatus is in.AppWrapper, when MultiKueue dispatches it and its
// worker was read, with the status of its verified copy there (none
// without one): what a
// decision reads of the AppWrapper controller's status (Failed or
// Succeeded, retries, the failure hold) is of the copy that ran its
// components. The manager's own status is MultiKueue's mirror of whatever
// AppWrapper of that name the worker holds (Kueue v0.17.0's adapter does
// not check which), possibly an older one's, and late.
func withCopyStatus(in Input) *awv1beta2.AppWrapper {
	if !MultiKueueManaged(in.AppWrapper) || in.Worker == nil {
		return in.AppWrapper
	}
	aw := in.AppWrapper.DeepCopy()
	aw.Status = awv1beta2.AppWrapperStatus{}
	owner, _, _ := componentsOwner(in)
	switch {
	case owner != nil:
		owner.Status.DeepCopyInto(&aw.Status)
	case in.Worker.Finished && in.Worker.AppWrapper == nil && in.Worker.Problem == "":
		// The run ended and MultiKueue removed its copy: the mirror here
		// is taken when it agrees with how the Workload finished, whose
		// Finished condition is this run's.
		want := map[string]awv1beta2.AppWrapperPhase{kueue.WorkloadFinishedReasonSucceeded: awv1beta2.AppWrapperSucceeded,
			kueue.WorkloadFinishedReasonFailed: awv1beta2.AppWrapperFailed}[in.Worker.FinishedReason]
		switch {
		case want == "":
			// Finished otherwise (out of sync): nothing says how it ran.
		case in.AppWrapper.Status.Phase == want:
			in.AppWrapper.Status.DeepCopyInto(&aw.Status)
		default:
			aw.Status.Phase = want
		}
	}
	return aw
}

// StatusForRules is, for an AppWrapper that MultiKueue dispatches, the
// status a rule's appWrapper variable holds: withCopyStatus's.
func StatusForRules(in Input) (awv1beta2.AppWrapperStatus, bool) {
	if !MultiKueueManaged(in.AppWrapper) || in.Worker == nil {
		return awv1beta2.AppWrapperStatus{}, false
	}
	return withCopyStatus(in).Status, true
}

// WorkerToRead says whether a decision on in needs the worker read.
func WorkerToRead(in Input) bool {
	return MultiKueueManaged(in.AppWrapper) && deployed(in.AppWrapper)
}
