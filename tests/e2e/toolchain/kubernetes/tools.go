//go:build tools

// Package tools pins the three control-plane commands build.sh builds. k8s.io/kubernetes cannot be
// `go install`ed (it requires its staging modules at v0.0.0); go.mod replaces each one with its
// published v0.Y.Z twin, as kubernetes/kubernetes#79384 describes.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
