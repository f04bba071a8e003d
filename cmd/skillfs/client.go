package main

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"skillfs/cmd/skillfs/api"
)

// call sends one API request to the daemon over its socket and decodes the
// JSON answer into out (or copies the raw body when out is an io.Writer).
func (c *cli) call(method, path string, body, out any) error {
	_, err := c.request(method, path, body, out)
	return err
}

// request is call that also returns the answer's header.
func (c *cli) request(method, path string, body, out any) (http.Header, error) {
	client, err := c.client()
	if err != nil {
		return nil, err
	}
	return client.Call(c.ctx, method, path, body, out)
}

// client is the daemon's API client of the data directory.
func (c *cli) client() (*api.Client, error) {
	home, err := c.homeDir()
	if err != nil {
		return nil, err
	}
	// Who asks (--as): a session acts for its own user whoever asks, but
	// only a caller who manages a skill is told why it was left out (the
	// operator without --as).
	return &api.Client{Socket: filepath.Join(home, api.SocketName), As: c.as}, nil
}

// notifyDaemon tells a running daemon that the catalog changed, so that
// revocations reach every session before the command returns.
func (c *cli) notifyDaemon() {
	err := c.call("POST", "/v1/catalog/changed", nil, nil)
	if err != nil && !errors.Is(err, errNoDaemon) {
		fmt.Fprintf(c.stderr, "skillfs: warning: the daemon did not apply the change to open sessions: %v\n", err)
	}
}
