package daemon

import (
	"net/http"

	"skillfs/cmd/skillfs/internal/catalog"
)

// curatedRoutes are the curated sources and the recommended list: the
// CLI's skill curated commands, skill list --curated and skill
// install-curated. Adding, removing and refreshing sources is for admins;
// listing and installing for every registered user.
func (d *Daemon) curatedRoutes(mux *apiMux) {
	mux.HandleFunc("GET /v1/curated", func(w http.ResponseWriter, r *http.Request) {
		list, err := d.cat.CuratedSources(r.Context(), actingAs(r))
		reply(w, list, err)
	})
	mux.HandleFunc("POST /v1/curated", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Source string `json:"source"`
			Ref    string `json:"ref"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		src, err := d.cat.AddCurated(r.Context(), catalog.CuratedRequest{Source: req.Source, Ref: req.Ref, As: actingAs(r), API: true})
		reply(w, src, err)
	})
	mux.HandleFunc("DELETE /v1/curated", func(w http.ResponseWriter, r *http.Request) {
		source := r.URL.Query().Get("source")
		err := d.cat.RemoveCurated(r.Context(), actingAs(r), source)
		reply(w, map[string]string{"removed": source}, err)
	})
	mux.HandleFunc("POST /v1/curated/refresh", func(w http.ResponseWriter, r *http.Request) {
		list, err := d.cat.RefreshCurated(r.Context(), catalog.CuratedRequest{Source: r.URL.Query().Get("source"), As: actingAs(r)})
		reply(w, list, err)
	})
	mux.HandleFunc("GET /v1/catalog", func(w http.ResponseWriter, r *http.Request) {
		list, err := d.cat.Entries(r.Context(), actingAs(r))
		reply(w, list, err)
	})
	mux.HandleFunc("GET /v1/curated/skills", func(w http.ResponseWriter, r *http.Request) {
		list, err := d.cat.Curated(r.Context(), actingAs(r))
		reply(w, list, err)
	})
	mux.HandleFunc("POST /v1/curated/install", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Name   string `json:"name"`
			Source string `json:"source"`
			Share  string `json:"share"`
		}
		if !readJSON(w, r, &req) {
			return
		}
		sh, err := readScope(req.Share)
		if err != nil {
			writeErr(w, err)
			return
		}
		res, err := d.cat.InstallCurated(r.Context(), catalog.CuratedRequest{Name: req.Name, Source: req.Source, Share: sh, As: actingAs(r)})
		reply(w, res, err)
	})
}
