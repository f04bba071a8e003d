package server

import (
	"net/http"

	"skillfs/cmd/skillfs/api"
	"skillfs/cmd/skillfs/internal/catalog"
)

// curatedRoutes are the curated sources and the recommended list: the
// CLI's skill curated commands, skill list --curated and skill
// install-curated. Adding, removing and refreshing sources is for admins;
// listing and installing for every registered user.
func (a *API) curatedRoutes(mux *Mux) {
	mux.HandleFunc("GET /v1/curated", a.curatedSources)
	mux.HandleFunc("POST /v1/curated", a.addCurated)
	mux.HandleFunc("DELETE /v1/curated", a.removeCurated)
	mux.HandleFunc("POST /v1/curated/refresh", a.refreshCurated)
	mux.HandleFunc("GET /v1/catalog", a.catalogEntries)
	mux.HandleFunc("GET /v1/curated/skills", a.curatedSkills)
	mux.HandleFunc("POST /v1/curated/install", a.installCurated)
}

func (a *API) curatedSources(w http.ResponseWriter, r *http.Request) {
	list, err := a.Curated.CuratedSources(r.Context(), actingAs(r))
	reply(w, list, err)
}

func (a *API) addCurated(w http.ResponseWriter, r *http.Request) {
	var req api.CuratedAddRequest
	if !readJSON(w, r, &req) {
		return
	}
	src, err := a.Curated.AddCurated(r.Context(), catalog.CuratedRequest{Source: req.Source, Ref: req.Ref, As: actingAs(r), API: true})
	reply(w, src, err)
}

func (a *API) removeCurated(w http.ResponseWriter, r *http.Request) {
	source := r.URL.Query().Get("source")
	err := a.Curated.RemoveCurated(r.Context(), actingAs(r), source)
	reply(w, api.Removed{Removed: source}, err)
}

func (a *API) refreshCurated(w http.ResponseWriter, r *http.Request) {
	list, err := a.Curated.RefreshCurated(r.Context(), catalog.CuratedRequest{Source: r.URL.Query().Get("source"), As: actingAs(r)})
	reply(w, list, err)
}

func (a *API) catalogEntries(w http.ResponseWriter, r *http.Request) {
	list, err := a.Curated.Entries(r.Context(), actingAs(r))
	reply(w, list, err)
}

func (a *API) curatedSkills(w http.ResponseWriter, r *http.Request) {
	list, err := a.Curated.Curated(r.Context(), actingAs(r))
	reply(w, list, err)
}

func (a *API) installCurated(w http.ResponseWriter, r *http.Request) {
	var req api.CuratedInstallRequest
	if !readJSON(w, r, &req) {
		return
	}
	sh, err := readScope(req.Share)
	if err != nil {
		writeErr(w, err)
		return
	}
	res, err := a.Curated.InstallCurated(r.Context(), catalog.CuratedRequest{Name: req.Name, Source: req.Source, Share: sh, As: actingAs(r)})
	reply(w, res, err)
}
