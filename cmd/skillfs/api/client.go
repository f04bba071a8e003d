package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"skillfs/skills"
)

// ErrNoDaemon marks a call that found no daemon listening on the socket.
var ErrNoDaemon = errors.New("daemon not running")

// KindError is an error whose message stands alone, marked with a kind (one
// of skills.Kinds' errors) that callers match but do not print: what a call
// the daemon refused returns, with the daemon's message and the kind its
// code names.
type KindError struct {
	Msg  string
	Kind error
}

func (e KindError) Error() string { return e.Msg }
func (e KindError) Unwrap() error { return e.Kind }

// Client calls the daemon's API over its Unix socket.
type Client struct {
	Socket string // the socket: SocketName in the data directory
	// As is the user the calls act for (ActAsHeader), "" for the operator.
	// A session acts for its own user whoever asks, but only a caller who
	// manages a skill is told why it was left out.
	As string
	// Token, when set, is sent as "Authorization: Bearer TOKEN": a session
	// or platform token, for a caller that is not the operator.
	Token string
}

// Call sends one request with body (nil for none) encoded as JSON, and
// decodes the JSON answer into out (or copies the raw body when out is an
// io.Writer; nil drops it). It returns the answer's header. A failed
// request's error carries the daemon's message and, through KindError,
// the kind its code names; no daemon on the socket is ErrNoDaemon.
func (c *Client) Call(ctx context.Context, method, path string, body, out any) (http.Header, error) {
	if body == nil {
		return c.Send(ctx, method, path, "", nil, out)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return c.Send(ctx, method, path, "application/json", bytes.NewReader(b), out)
}

// Send is Call with a body of its own: body (nil for none) is sent as it
// is, of the content type given.
func (c *Client) Send(ctx context.Context, method, path, contentType string, body io.Reader, out any) (http.Header, error) {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", c.Socket)
		},
	}}
	defer hc.CloseIdleConnections() // a connection kept alive would hold one of the socket's slots
	req, err := http.NewRequestWithContext(ctx, method, "http://skillfs"+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.As != "" {
		req.Header.Set(ActAsHeader, c.As)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("the skillfs daemon is not running (no socket at %s): start it with `skillfs serve`: %w", c.Socket, ErrNoDaemon)
		}
		return nil, fmt.Errorf("reach the daemon at %s: %w", c.Socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, failure(resp)
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

// failure is the error a failed answer reports.
func failure(resp *http.Response) error {
	var e Error
	json.NewDecoder(resp.Body).Decode(&e)
	if e.Error == "" {
		e.Error = resp.Status
	}
	if kind := skills.CodeError(e.Code); kind != nil {
		return KindError{Msg: e.Error, Kind: kind}
	}
	return errors.New(e.Error)
}
