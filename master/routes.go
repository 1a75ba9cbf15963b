package master

import (
	"net/http"
	"strings"
)

// prefixRoute is a mounted pattern of the form "/p/" (no method, no host,
// no wildcard, no escape) below which no other pattern is registered: ServeMux picks
// it for every clean path that starts with it, whatever the method, as
// long as no pattern names a host. serveHTTP serves such requests without
// asking the mux (TestServer_MountedRoutes compares the two).
type prefixRoute struct {
	prefix  string
	handler http.Handler
}

// handle registers h for pattern on the mux, and recomputes the prefix
// routes. It panics as ServeMux.Handle does.
func (s *Server) handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	s.routesMu.Lock()
	defer s.routesMu.Unlock()
	s.patterns = append(s.patterns, registered{pattern, h})
	var routes []prefixRoute
	for _, p := range s.patterns {
		host, path := splitPattern(p.pattern)
		if host != "" {
			// A host's patterns take precedence over the others.
			routes = nil
			break
		}
		if p.pattern != path || !strings.HasSuffix(path, "/") || strings.ContainsAny(path, "{%") {
			continue
		}
		alone := true
		for _, q := range s.patterns {
			if _, qpath := splitPattern(q.pattern); q.pattern != p.pattern && strings.HasPrefix(qpath, path) {
				alone = false
				break
			}
		}
		if alone {
			routes = append(routes, prefixRoute{prefix: path, handler: p.handler})
		}
	}
	s.prefixes.Store(&routes)
}

// registered is a pattern registered on the mux and its handler.
type registered struct {
	pattern string
	handler http.Handler
}

// splitPattern returns the host and the path of a ServeMux pattern
// "[METHOD ][HOST]/[PATH]".
func splitPattern(pattern string) (host, path string) {
	rest := pattern
	if i := strings.IndexAny(rest, " \t"); i >= 0 {
		rest = strings.TrimLeft(rest[i:], " \t")
	}
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return rest, ""
	}
	return rest[:i], rest[i:]
}

// prefixRouteOf returns the prefix route that serves r, if there is one:
// r's path is clean, written without escapes that change it, and below the
// route's prefix.
func (s *Server) prefixRouteOf(r *http.Request) (http.Handler, string, bool) {
	routes := s.prefixes.Load()
	if routes == nil || len(*routes) == 0 || r.Method == http.MethodConnect || r.URL.RawPath != "" || !cleanPath(r.URL.Path) {
		return nil, "", false
	}
	for _, pr := range *routes {
		if strings.HasPrefix(r.URL.Path, pr.prefix) {
			return pr.handler, pr.prefix, true
		}
	}
	return nil, "", false
}

// cleanPath reports whether p is a path that ServeMux does not redirect
// to a cleaned form: it starts with a slash and has no empty segment
// (but the last), no "." and no "..".
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 1; ; {
		j := strings.IndexByte(p[i:], '/')
		seg := p[i:]
		if j >= 0 {
			seg = p[i : i+j]
		}
		if seg == "." || seg == ".." || (seg == "" && j >= 0) {
			return false
		}
		if j < 0 {
			return true
		}
		i += j + 1
	}
}
