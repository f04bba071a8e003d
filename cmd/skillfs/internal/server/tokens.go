package server

import (
	"net/http"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
)

// tokenRoutes are the credentials: who a request is, a session's token
// rotated, and the named platform tokens.
func (a *API) tokenRoutes(mux *Mux) {
	mux.HandleFunc("GET /v1/whoami", a.whoami)
	mux.HandleFunc("POST /v1/sessions/{id}/token", a.rotateSessionToken)
	mux.HandleFunc("POST /v1/tokens", a.createToken)
	mux.HandleFunc("GET /v1/tokens", a.listTokens)
	mux.HandleFunc("DELETE /v1/tokens/{name}", a.revokeToken)
}

// whoami answers what the request's credential proves.
func (a *API) whoami(w http.ResponseWriter, r *http.Request) {
	p := principalOrOperator(r.Context())
	out := api.Whoami{Role: p.Role.String(), Session: p.Session, Token: p.Token, User: actingAs(r)}
	if p.Role == RoleSession {
		info, err := a.Sessions.SessionInfo(r.Context(), p.Session)
		if err != nil {
			writeErr(w, err)
			return
		}
		out.User = info.User
	}
	if out.User == "" {
		out.User = catalog.Operator
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) rotateSessionToken(w http.ResponseWriter, r *http.Request) {
	tok, err := a.Credentials.RotateSessionToken(r.Context(), r.PathValue("id"))
	reply(w, tok, err)
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request) {
	var req api.TokenRequest
	if !readJSON(w, r, &req) {
		return
	}
	tok, err := a.Credentials.CreateToken(r.Context(), req)
	reply(w, tok, err)
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request) {
	list, err := a.Credentials.Tokens(r.Context())
	reply(w, api.NonNil(list), err)
}

func (a *API) revokeToken(w http.ResponseWriter, r *http.Request) {
	err := a.Credentials.RevokeToken(r.Context(), r.PathValue("name"))
	reply(w, api.Revoked{Revoked: r.PathValue("name")}, err)
}
