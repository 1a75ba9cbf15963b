// Package baseurl reads the base URL of a peer given on the command line
// or in a configuration: http or https, with a host; a bare host:port
// means http.
package baseurl

import (
	"errors"
	"net/url"
	"strings"
)

// Parse reads s as a base URL, its path without a trailing slash.
func Parse(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("the scheme must be http or https")
	}
	if u.Host == "" {
		return nil, errors.New("no host")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}
