package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
	"google.golang.org/grpc"
)

// volumeSource plays the part of the kubelet for csi-sanity's specs that
// need a volume: a node-only driver of ephemeral volumes has no
// CreateVolume, the CO makes up the volume id and context itself. Sanity
// asks CreateVolume of its "controller" address for them; this answers
// with a new id and the context a kubelet sends for an inline volume of a
// pod the policy allows. It is no controller of the driver's: the driver
// advertises none, so sanity's controller specs are skipped (see
// TestSanity).
type volumeSource struct {
	csi.UnimplementedControllerServer
	mu sync.Mutex
	n  int
}

func (v *volumeSource) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	v.mu.Lock()
	v.n++
	n := v.n
	v.mu.Unlock()
	uid := fmt.Sprintf("sanity-pod-%d", n)
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      "csi-sanity-" + req.GetName(),
		VolumeContext: podContext("agents", "sanity", uid, "runner", map[string]string{AttrUser: "alice", AttrSkills: testSkill}),
	}}, nil
}

func (v *volumeSource) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

// TestSanity runs csi-sanity's Identity and Node specs over the plugin's
// socket, against a real daemon: the 11 that apply to a node-only driver
// of ephemeral volumes run and must pass (sanitySpecs). Skipped, as not
// applying: the controller and group controller specs (no controller is
// advertised; the group controller's panic in their AfterEach when their
// BeforeEach skips, so they are left out by name), the Node specs that run
// a controller's whole cycle (sanity skips them itself without a
// controller), the single-node-multi-writer one (not advertised: every
// volume is read-only), and the optional node calls not advertised
// (stage/unstage, volume stats, expand, volume and storage health: sanity
// skips those itself).
func TestSanity(t *testing.T) {
	n := startNode(t)
	src := filepath.Join(t.TempDir(), "controller.sock")
	l, err := Listen("unix://" + src)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterControllerServer(srv, &volumeSource{})
	csi.RegisterIdentityServer(srv, n.driver) // sanity asks the "controller" address who it is too
	go srv.Serve(l)
	defer srv.Stop()

	dir := t.TempDir()
	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + n.ep
	cfg.ControllerAddress = "unix://" + src
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestVolumeParameters = map[string]string{}
	sc := sanity.GinkgoTest(&cfg)
	var passed []string
	ginkgo.ReportAfterSuite("passed specs", func(r ginkgo.Report) {
		for _, s := range r.SpecReports {
			if s.LeafNodeType == types.NodeTypeIt && s.State == types.SpecStatePassed {
				passed = append(passed, s.FullText())
			}
		}
	})
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	suite.SkipStrings = []string{`\[Controller Server\]`, `\[GroupController`}
	reporter.Verbose = testing.Verbose()
	if !ginkgo.RunSpecs(t, "skillfs-csi sanity", suite, reporter) {
		t.Error("csi-sanity failed")
	}
	sc.Finalize()
	for _, want := range sanitySpecs {
		if !slices.Contains(passed, want) {
			t.Errorf("sanity spec %q did not run and pass", want)
		}
	}
	if left := n.driverSessions(); len(left) != 0 {
		t.Errorf("sessions left after sanity: %+v", left)
	}
	if m, _ := mountsBelow(dir); len(m) > 0 {
		t.Errorf("mounts left after sanity: %v", m)
	}
	if _, err := os.Stat(cfg.TargetPath); err == nil {
		t.Logf("sanity's target folder %s is still there", cfg.TargetPath)
	}
}

// sanitySpecs are the specs that apply, by their full text.
var sanitySpecs = []string{
	"Identity Service GetPluginCapabilities should return appropriate capabilities",
	"Identity Service Probe should return appropriate information",
	"Identity Service GetPluginInfo should return appropriate information",
	"Node Service NodeGetCapabilities should return appropriate capabilities",
	"Node Service NodeGetInfo should return appropriate values",
	"Node Service NodePublishVolume should fail when no volume id is provided",
	"Node Service NodePublishVolume should fail when no target path is provided",
	"Node Service NodePublishVolume should fail when no volume capability is provided",
	"Node Service NodeUnpublishVolume should fail when no volume id is provided",
	"Node Service NodeUnpublishVolume should fail when no target path is provided",
	"Node Service NodeUnpublishVolume should remove target path",
}
