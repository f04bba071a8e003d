package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"syscall"

	"skillfs/cmd/skillfs/internal/daemon"
	"skillfs/skills"
)

// call sends one API request to the daemon over its socket and decodes the
// JSON answer into out (or copies the raw body when out is an io.Writer).
func (c *cli) call(method, path string, body, out any) error {
	_, err := c.request(method, path, body, out)
	return err
}

// request is call that also returns the answer's header.
func (c *cli) request(method, path string, body, out any) (http.Header, error) {
	home, err := c.homeDir()
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(home, daemon.SocketName)
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(c.ctx, method, "http://skillfs"+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.as != "" {
		// Who asks (--as): a session acts for its own user whoever asks,
		// but only a caller who manages a skill is told why it was left
		// out (the operator without --as).
		req.Header.Set(daemon.ActAsHeader, c.as)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("the skillfs daemon is not running (no socket at %s): start it with `skillfs serve`: %w", sock, errNoDaemon)
		}
		return nil, fmt.Errorf("reach the daemon at %s: %w", sock, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		if e.Error == "" {
			e.Error = resp.Status
		}
		if kind := skills.CodeError(e.Code); kind != nil {
			return nil, &apiErr{msg: e.Error, kind: kind}
		}
		return nil, errors.New(e.Error)
	}
	if w, ok := out.(io.Writer); ok {
		_, err := io.Copy(w, resp.Body)
		return resp.Header, err
	}
	if out == nil {
		return resp.Header, nil
	}
	return resp.Header, json.NewDecoder(resp.Body).Decode(out)
}

// apiErr carries the daemon's message and the error kind it reported.
type apiErr struct {
	msg  string
	kind error
}

func (e *apiErr) Error() string { return e.msg }
func (e *apiErr) Unwrap() error { return e.kind }

// notifyDaemon tells a running daemon that the catalog changed, so that
// revocations reach every session before the command returns.
func (c *cli) notifyDaemon() {
	err := c.call("POST", "/v1/catalog/changed", nil, nil)
	if err != nil && !errors.Is(err, errNoDaemon) {
		fmt.Fprintf(c.stderr, "skillfs: warning: the daemon did not apply the change to open sessions: %v\n", err)
	}
}
