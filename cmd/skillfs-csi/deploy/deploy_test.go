// Package deploy holds the Kubernetes manifests of the node components and
// their image's Containerfile, and checks them offline: every document is
// decoded strictly into its Kubernetes type, and then checked as a reviewer
// would, against the binaries' flags, the claims policy's parser and each
// other. It has no code of its own outside its tests: nothing here is linked
// into a binary.
package deploy

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// tree is what the checks read: the files of this folder (manifests, the
// Containerfile) by their slash paths relative to it, and the project's
// files they are checked against under refs.
type tree struct {
	files map[string][]byte
	refs  map[string][]byte
}

// The project's files the manifests are checked against, relative to this
// folder: the generated command reference (the flags of skillfs) and go.mod
// (the Go release the image must build with).
var refFiles = map[string]string{
	"CLI.md": "../../skillfs/CLI.md",
	"go.mod": "../../../go.mod",
}

func readTree(t testing.TB) tree {
	t.Helper()
	tr := tree{files: map[string][]byte{}, refs: map[string][]byte{}}
	err := fs.WalkDir(os.DirFS("."), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if isManifest(p) || p == "Containerfile" {
			data, err := os.ReadFile(p)
			tr.files[p] = data
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range refFiles {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tr.refs[name] = data
	}
	return tr
}

func isManifest(p string) bool { return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") }

// with is a copy of tr with old replaced by new in file (of the folder, or
// a ref); old must occur exactly once, so a mutation never silently misses.
func (tr tree) with(t testing.TB, file, old, new string) tree {
	t.Helper()
	c := tree{files: maps(tr.files), refs: maps(tr.refs)}
	m := c.files
	if _, ok := m[file]; !ok {
		m = c.refs
	}
	data, ok := m[file]
	if !ok {
		t.Fatalf("no file %s", file)
	}
	if n := bytes.Count(data, []byte(old)); n != 1 {
		t.Fatalf("%s holds %q %d times, want once", file, old, n)
	}
	m[file] = bytes.Replace(data, []byte(old), []byte(new), 1)
	return c
}

func maps(m map[string][]byte) map[string][]byte {
	c := make(map[string][]byte, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// object is one decoded document: where it is, and what.
type object struct {
	file string
	line int // of the document's first line
	obj  runtime.Object
}

func (o object) String() string { return fmt.Sprintf("%s line %d", o.file, o.line) }

// The kinds the manifests may hold, by apiVersion and kind; anything else
// is refused.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, storagev1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	s.AddKnownTypeWithName(kustomizationKind, &kustomization{})
	return s
}()

// decoder decodes YAML as the API server's strict field validation does:
// field names case-sensitive, an unknown or duplicate field an error.
var decoder = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// The kinds of the manifests.
var (
	namespaceKind      = corev1.SchemeGroupVersion.WithKind("Namespace")
	serviceAccountKind = corev1.SchemeGroupVersion.WithKind("ServiceAccount")
	configMapKind      = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	quotaKind          = corev1.SchemeGroupVersion.WithKind("ResourceQuota")
	podKind            = corev1.SchemeGroupVersion.WithKind("Pod")
	daemonSetKind      = appsv1.SchemeGroupVersion.WithKind("DaemonSet")
	csiDriverKind      = storagev1.SchemeGroupVersion.WithKind("CSIDriver")
	kustomizationKind  = schema.GroupVersionKind{Group: "kustomize.config.k8s.io", Version: "v1beta1", Kind: "Kustomization"}
)

// manifestKinds are the kinds a file may hold where: the examples hold
// what a user of the driver writes, the folder what an operator applies.
var manifestKinds = map[bool][]schema.GroupVersionKind{
	false: {namespaceKind, serviceAccountKind, configMapKind, quotaKind, daemonSetKind, csiDriverKind, kustomizationKind},
	true:  {namespaceKind, serviceAccountKind, podKind},
}

// kustomization is the part of kustomize's Kustomization the folder uses.
type kustomization struct {
	metav1.TypeMeta `json:",inline"`
	Resources       []string `json:"resources"`
	Images          []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

func (k *kustomization) DeepCopyObject() runtime.Object {
	c := *k
	c.Resources = slices.Clone(k.Resources)
	c.Images = slices.Clone(k.Images)
	return &c
}

// decodeFile decodes every document of a YAML file; documents holding
// nothing but comments are skipped.
func decodeFile(name string, data []byte) ([]object, error) {
	var objs []object
	for _, d := range splitDocuments(data) {
		if isBlank(d.text) {
			continue
		}
		obj, gvk, err := decoder.Decode(d.text, nil, nil)
		if err != nil {
			return objs, fmt.Errorf("%s line %d: %v", name, d.line, err)
		}
		inExamples := strings.HasPrefix(name, "examples/")
		if !slices.Contains(manifestKinds[inExamples], *gvk) {
			return objs, fmt.Errorf("%s line %d: a %s has no place here", name, d.line, gvk)
		}
		objs = append(objs, object{file: name, line: d.line, obj: obj})
	}
	return objs, nil
}

type document struct {
	line int
	text []byte
}

// splitDocuments splits YAML at its "---" lines; each document's line is
// that of its first line that is not a comment.
func splitDocuments(data []byte) []document {
	var docs []document
	var cur document
	for i, l := range bytes.SplitAfter(data, []byte("\n")) {
		s := strings.TrimRight(string(l), " \t\r\n")
		if s == "---" || strings.HasPrefix(s, "--- ") {
			docs = append(docs, cur)
			cur = document{}
			continue
		}
		if t := strings.TrimSpace(s); cur.line == 0 && t != "" && !strings.HasPrefix(t, "#") {
			cur.line = i + 1
		}
		cur.text = append(cur.text, l...)
	}
	return append(docs, cur)
}

func isBlank(doc []byte) bool {
	for _, l := range strings.Split(string(doc), "\n") {
		if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "#") {
			return false
		}
	}
	return true
}

// bundle is the tree decoded: every object, and the Containerfile.
type bundle struct {
	tree
	objs []object

	daemonDone  bool
	daemonFacts *daemonFacts
}

func (b *bundle) all(gvk schema.GroupVersionKind, examples bool) []object {
	var out []object
	for _, o := range b.objs {
		if o.obj.GetObjectKind().GroupVersionKind() == gvk && strings.HasPrefix(o.file, "examples/") == examples {
			out = append(out, o)
		}
	}
	return out
}

// problems collects what the checks find, each naming where.
type problems []string

func (p *problems) add(where fmt.Stringer, format string, args ...any) {
	*p = append(*p, where.String()+": "+fmt.Sprintf(format, args...))
}

type at string

func (a at) String() string { return string(a) }

// validate is every check over tr: what a reviewer of the manifests looks for.
func validate(tr tree) problems {
	var p problems
	b := &bundle{tree: tr}
	names := make([]string, 0, len(tr.files))
	for name := range tr.files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !isManifest(name) {
			continue
		}
		objs, err := decodeFile(name, tr.files[name])
		if err != nil {
			p = append(p, err.Error())
		}
		b.objs = append(b.objs, objs...)
	}
	if len(p) > 0 {
		return p // the checks below need every document
	}
	for _, check := range checks {
		check(b, &p)
	}
	return p
}

var checks = []func(*bundle, *problems){
	checkKustomization,
	checkNamespaced,
	checkCSIDriver,
	checkPods,
	checkDaemon,
	checkPlugin,
	checkSidecars,
	checkKeeper,
	checkDaemonConfig,
	checkPolicy,
	checkExamplePod,
	checkContainerfile,
}

func TestManifests(t *testing.T) {
	needPluginFlags(t)
	tr := readTree(t)
	for _, want := range []string{"kustomization.yaml", "namespace.yaml", "csidriver.yaml", "node.yaml", "keeper.yaml",
		"policy.yaml", "config.yaml", "examples/pod.yaml", "Containerfile"} {
		if _, ok := tr.files[want]; !ok {
			t.Errorf("no %s", want)
		}
	}
	for _, p := range validate(tr) {
		t.Error(p)
	}
}

// TestManifestMutations: every check fails on a manifest broken the way
// it guards against (so none of them passes whatever the manifests hold).
func TestManifestMutations(t *testing.T) {
	needPluginFlags(t)
	tr := readTree(t)
	if p := validate(tr); len(p) > 0 {
		t.Fatalf("the manifests themselves fail: %v", p)
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			p := validate(tr.with(t, m.file, m.old, m.new))
			for _, s := range p {
				if strings.Contains(s, m.want) {
					t.Logf("refused: %s", s)
					return
				}
			}
			t.Errorf("%s with %q for %q: no problem saying %q, got %q", m.file, m.new, m.old, m.want, p)
		})
	}
}
