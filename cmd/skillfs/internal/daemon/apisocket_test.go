package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
	"skillfs/skills"
)

// getOn answers GET path through the Unix socket at sock: its status and
// body, or the error of reaching it.
func getOn(sock, path string) (int, string, error) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	resp, err := client.Get("http://skillfs" + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestBindAPISocket: a bind with an API socket (in the daemon's namespace
// here; in sandboxes in package bind and the integration tests) serves the
// session's API on it, counted by the gauge, until unbind, close or
// shutdown remove it; a restart after a crash makes it again over the file
// left, and leaves alone a file that is not its own.
func TestBindAPISocket(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	install(t, d, "name: x\ndescription: one skill", skills.ScopeGlobal)
	info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, Skills: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	target, sock := filepath.Join(dir, "skills"), filepath.Join(dir, "api.sock")
	gauge := func() float64 { return series(t, d.metrics)["skillfs_api_sockets"] }
	serves := func() {
		t.Helper()
		code, body, err := getOn(sock, "/v1/sessions/"+info.ID+"/prompt")
		if err != nil || code != http.StatusOK || !strings.Contains(body, "one skill") {
			t.Fatalf("the session's prompt through its socket: %d %q %v", code, body, err)
		}
	}
	gone := func(what string) {
		t.Helper()
		if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("after %s the socket file is there: %v", what, err)
		}
		if n := gauge(); n != 0 {
			t.Fatalf("after %s the gauge says %v sockets", what, n)
		}
	}

	b, err := d.Bind(ctx, info.ID, skills.Bind{Target: target, APISocket: sock})
	if err != nil {
		t.Fatal(err)
	}
	if b.APISocket != sock || b.SocketID == "" {
		t.Fatalf("bound %+v", b)
	}
	serves()
	if n := gauge(); n != 1 {
		t.Fatalf("gauge %v, want 1", n)
	}
	if s, err := d.SessionInfo(ctx, info.ID); err != nil || len(s.Binds) != 1 || s.Binds[0].APISocket != sock {
		t.Fatalf("the session shows its binds as %+v, %v", s, err)
	}
	if err := d.Unbind(ctx, info.ID, target, 0); err != nil {
		t.Fatal(err)
	}
	gone("unbind")
	if _, _, err := getOn(sock, "/v1/whoami"); err == nil {
		t.Fatal("the socket answers after unbind")
	}

	// A file in the way, a folder missing, a relative path, the data
	// directory: refused, nothing bound.
	if err := os.WriteFile(sock, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]error{sock: skills.ErrExists, filepath.Join(dir, "none", "api.sock"): skills.ErrNotFound,
		"api.sock": skills.ErrInvalid, filepath.Join(d.cat.Home(), "api.sock"): skills.ErrInvalid} {
		if _, err := d.Bind(ctx, info.ID, skills.Bind{Target: target, APISocket: path}); !errors.Is(err, want) {
			t.Fatalf("bind with the api socket %q: %v, want %v", path, err, want)
		}
		if binds, err := d.db.Binds(ctx, info.ID); err != nil || len(binds) != 0 {
			t.Fatalf("after a refused bind: %v, %v", binds, err)
		}
		if names, _ := os.ReadDir(target); len(names) != 0 {
			t.Fatalf("the view is bound after a refused bind: %v", names)
		}
	}
	if b, err := os.ReadFile(sock); err != nil || string(b) != "mine" {
		t.Fatalf("the file in the way: %q, %v", b, err)
	}
	os.Remove(sock)

	// A crash: the listener and the view die, the socket file stays. The
	// restart makes it again over the file left.
	b, err = d.Bind(ctx, info.ID, skills.Bind{Target: target, APISocket: sock})
	if err != nil {
		t.Fatal(err)
	}
	crash := func() {
		t.Helper()
		d.sockets.take(keyOf(info.ID, b))()
		if err := d.binder().Detach(b); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(sock); err != nil {
			t.Fatal(err)
		}
	}
	crash()
	d.rebind(ctx)
	serves()
	binds, err := d.db.Binds(ctx, info.ID)
	if err != nil || len(binds) != 1 || binds[0].APISocket != sock || binds[0].SocketID == "" {
		t.Fatalf("recorded after the rebind: %+v, %v", binds, err)
	}
	b = binds[0]

	// A file not its own at the socket's path after a crash: the view is
	// rebound, the file left, the socket not made, the record kept.
	crash()
	os.Remove(sock)
	if err := os.WriteFile(sock, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.rebind(ctx)
	if names, err := os.ReadDir(target); err != nil || len(names) != 1 {
		t.Fatalf("the view after the rebind: %v, %v", names, err)
	}
	if got, err := os.ReadFile(sock); err != nil || string(got) != "mine" {
		t.Fatalf("the file in the socket's place: %q, %v", got, err)
	}
	if n := gauge(); n != 0 {
		t.Fatalf("gauge %v with the socket not made", n)
	}
	if binds, _ := d.db.Binds(ctx, info.ID); len(binds) != 1 || binds[0].APISocket != sock {
		t.Fatalf("recorded after the rebind without its socket: %+v", binds)
	}
	os.Remove(sock)
	d.rebind(ctx) // the view is a live mount: left alone, so is everything else
	if err := d.Unbind(ctx, info.ID, target, 0); err != nil {
		t.Fatal(err)
	}

	// Closing the session removes its socket.
	if _, err := d.Bind(ctx, info.ID, skills.Bind{Target: target, APISocket: sock}); err != nil {
		t.Fatal(err)
	}
	serves()
	if err := d.CloseSession(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	gone("close")
}

// TestShutdownRemovesAPISockets: the binds released at shutdown take their
// sockets with them; the records stay for the next start.
func TestShutdownRemovesAPISockets(t *testing.T) {
	ctx := context.Background()
	d := newTestDaemon(t)
	info, err := d.CreateSession(ctx, api.CreateRequest{User: catalog.Operator, All: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "api.sock")
	if _, err := d.Bind(ctx, info.ID, skills.Bind{Target: filepath.Join(dir, "skills"), APISocket: sock}); err != nil {
		t.Fatal(err)
	}
	d.unbindAll(ctx)
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after shutdown: %v", err)
	}
	if d.sockets.count() != 0 {
		t.Fatalf("%d sockets served after shutdown", d.sockets.count())
	}
	if binds, _ := d.db.Binds(ctx, info.ID); len(binds) != 1 || binds[0].APISocket != sock {
		t.Fatalf("records after shutdown: %+v", binds)
	}
	d.rebind(ctx)
	code, body, err := getOn(sock, "/v1/whoami")
	d.unbindAll(ctx)
	if err != nil || code != http.StatusOK || !strings.Contains(body, info.ID) {
		t.Fatalf("after the next start: %d %s, %v", code, body, err)
	}
}
