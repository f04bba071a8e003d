module skillfs

go 1.26.8

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/mattn/go-sqlite3 v1.14.53
	golang.org/x/sys v0.50.0
	gopkg.in/yaml.v3 v3.0.1
)
