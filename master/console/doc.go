// Package console serves the Squall console: a browser user interface
// for the configuration, test-event and findings APIs, mounted at /ui/ by
// every master and by squall dev.
//
// # Assets
//
// The console is plain HTML, CSS and JavaScript modules under assets/,
// embedded with go:embed: building and testing need no front-end tool,
// and nothing is loaded from another origin, so it works offline.
//
// # Security
//
// The handler serves static files only: it holds no secret and grants
// nothing. The page calls the same APIs as any client, with the bearer
// token the user pasted (or that the squall dev link carried in its
// fragment, which never reaches a server), kept in the tab's session
// storage; the APIs enforce every role. Every answer carries a strict
// Content-Security-Policy (same origin only, no inline script or style,
// no framing), nosniff and no-referrer. Only GET and HEAD are served; a
// path that names no asset is a JSON 404, and folders are never listed.
package console
