// Package gc holds wrapup's controllers around one pure decision
// (gc/decision). Its rooms:
//
//   - appwrapper_controller.go: the AppWrapper controller; its Reconcile
//     says how one completion goes, from the trigger's event to the delete.
//     Beside it: memory.go, what it remembers of each AppWrapper between
//     reconciles; observe.go, where it reads (the caches, the trigger
//     informers it claims); groupread.go, the final checks' LISTs of the
//     rules; ownwrites.go, the events of its own deletes, which bring no
//     decision; startgate.go, its workers' start once the rules' trigger
//     kinds have listed.
//   - history_controller.go: removes CompletionRecords past their
//     retention, never one whose AppWrapper exists.
//   - rule_controller.go: each CompletionRule's status and its kind's
//     informer; counters.go the rules' outcome counters.
//   - workers.go: MultiKueue's worker clusters, each with its own trigger
//     informers.
//   - cache.go: what the manager's caches keep; webhook.go: the rules'
//     admission; setup.go wires it all; metrics.go, rbac.go.
//
// Beside it: gc/decision (what to do, pure; its Events, each reason with
// its message, in events.go), gc/read (the read side: Gather, through the
// caches, the API server or a tool's reader), gc/triggers (the trigger
// informers) and gc/intern (the strings the caches share). What people are
// shown of a decision (Explain, the history) is kubectl-wrapup's, in
// cmd/kubectl-wrapup/view, made on the same read side and decision.
package gc
