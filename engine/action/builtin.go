package action

// BuiltinIDs returns the ids of the executors this package builds, sorted:
// the action ids that an engine or a master can run once its settings
// enable them (see [NewRegistry]). Any other action id has no executor
// unless one is added through [Deps.Executors]; tools that convert trees
// from elsewhere (import-tornado) check against this list.
func BuiltinIDs() []string {
	return []string{IDArchive, IDElasticsearch, IDFinding, IDForeach, IDHTTP, IDKafka, IDLogger, IDScript}
}
