//go:build tools

// Package tools pins etcd's server, whose main package is the etcd binary, for build.sh.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
