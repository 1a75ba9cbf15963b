package main

import (
	"github.com/squallhq/squall/master"
	"github.com/squallhq/squall/master/console"
)

// mountConsole serves the console at /ui/ on every node: it is static,
// and the API calls it makes are forwarded to the leader like any other.
func mountConsole(srv *master.Server) error {
	c, err := console.New()
	if err != nil {
		return err
	}
	return srv.Mount("GET "+console.Prefix, c, master.OnAnyNode)
}

// consoleLink is the console's address that signs in with token: the
// fragment never reaches the server, and the page moves it into the
// tab's session storage and clears it from the address bar.
func consoleLink(addr, token string) string {
	return "http://" + addr + console.Prefix + "#token=" + token
}
