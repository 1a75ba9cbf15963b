// Package watcher keeps the satellite's set of webhooks in step with a folder
// of webhook files, with fsnotify.
//
// The folder is watched, never the files: editors save by writing a
// temporary file and renaming it over the old one, and Kubernetes swaps a
// ConfigMap by re-pointing the hidden ..data symbolic link, without any event
// named after a webhook file. So every event is only a hint. After a quiet
// period ([Config.Debounce], 200 ms by default; at most 5× that during a
// stream of events) the whole folder is read with [webhooks.LoadDir], every
// file is parsed and validated, and the complete new set is published at once
// through an atomic pointer: a request sees either the old set or the new
// one, never a mix. A read that finds the same file contents as before
// (hashed) publishes nothing.
//
// A file that cannot be parsed, or whose id an earlier file (in name order)
// already uses, is left out of the set, logged with the reason, and counted
// in squall_webhooks_file_errors_total by reason; the other webhooks are not
// affected. A half-written file is therefore left out until the write that
// completes it, whose event leads to another read. Removing a file removes
// its endpoint. If the folder cannot be read at all, the current set stays.
//
// Lost events (inotify queue overflow) lead to an immediate read; a periodic
// read ([Config.RescanInterval], 30 s by default) is the safety net for
// anything else, and watches the folder again if it was removed and created
// anew.
package watcher
