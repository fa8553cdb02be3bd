// Package celpolicies compiles and evaluates the CEL expressions of
// CompletionRules: whether an AppWrapper's trigger component succeeded or
// failed, and the message recorded with the outcome.
//
// Expressions run in the Kubernetes base CEL environment, with the libraries
// and cost limits of CRD validation rules, over three variables: object (the
// live trigger), appWrapper, and variables (the rule's named expressions,
// evaluated lazily, at most once per evaluation, as in a
// ValidatingAdmissionPolicy). Kinds with well-known status (batch Jobs,
// JobSets, Kubeflow jobs, TrainJobs, RayJobs, Pods, Argo Workflows, Volcano
// Jobs, SparkApplications, Tekton PipelineRuns and TaskRuns) have built-in
// success and failure expressions, used when the rule leaves them empty;
// StatesOf says what each of their controllers writes in its status.
// Those are fixed and linear in the object's conditions, so they run without
// cost tracking, which would otherwise take most of their time.
//
// A compile error is a property of the rule and is cached with it; a runtime
// error is a property of one evaluation and always means "not finished".
package celpolicies
