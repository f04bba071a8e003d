package deploy

// mutation is a manifest broken one way: old replaced by new in file, and
// what the problem found must say.
type mutation struct {
	name, file, old, new, want string
}

var mutations = []mutation{
	// Decoding.
	{"unknown field", "csidriver.yaml", "  attachRequired: false\n", "  attachRequired: false\n  attachRequire: false\n", `unknown field "spec.attachRequire"`},
	{"field of another case", "csidriver.yaml", "fsGroupPolicy: None", "fsgroupPolicy: None", `unknown field "spec.fsgroupPolicy"`},
	{"duplicate field", "csidriver.yaml", "  storageCapacity: false\n", "  storageCapacity: false\n  storageCapacity: true\n", `key "storageCapacity" already set in map`},
	{"unknown kind", "namespace.yaml", "kind: Namespace\n", "kind: Namespaces\n", `no kind "Namespaces"`},
	{"kind out of place", "examples/pod.yaml", "apiVersion: v1\nkind: Namespace\n", "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\n", "has no place here"},
	{"wrong value type", "node.yaml", "minReadySeconds: 10", "minReadySeconds: ten", "minReadySeconds"},

	// The driver.
	{"attach required", "csidriver.yaml", "attachRequired: false", "attachRequired: true", "attachRequired"},
	{"no pod info", "csidriver.yaml", "podInfoOnMount: true", "podInfoOnMount: false", "podInfoOnMount"},
	{"persistent volumes", "csidriver.yaml", "volumeLifecycleModes: [Ephemeral]", "volumeLifecycleModes: [Ephemeral, Persistent]", "volumeLifecycleModes"},
	{"fsGroup applied", "csidriver.yaml", "fsGroupPolicy: None", "fsGroupPolicy: File", "fsGroupPolicy"},
	{"driver renamed", "csidriver.yaml", "name: csi.skillfs", "name: skillfs.csi", "--driver-name csi.skillfs is not the CSIDriver's skillfs.csi"},

	// The daemon.
	{"daemon unprivileged", "node.yaml", "            privileged: true", "            privileged: false", "not privileged"},
	{"pods folder not bidirectional", "node.yaml", "mountPath: /var/lib/kubelet/pods\n              mountPropagation: Bidirectional",
		"mountPath: /var/lib/kubelet/pods\n              mountPropagation: HostToContainer", "the pods folder: mount of /var/lib/kubelet/pods is not Bidirectional"},
	{"data directory not bidirectional", "node.yaml", "mountPath: /var/lib/skillfs\n              mountPropagation: Bidirectional",
		"mountPath: /var/lib/skillfs\n              mountPropagation: None", "the data directory: mount of /var/lib/skillfs is not Bidirectional"},
	{"pods folder elsewhere", "node.yaml", "            path: /var/lib/kubelet/pods\n", "            path: /srv/kubelet/pods\n", "the kubelet's paths are the node's"},
	{"no /dev/fuse", "node.yaml", "            path: /dev/fuse\n            type: CharDevice", "            path: /dev/fuse\n            type: File", "/dev/fuse is not"},
	{"unknown serve flag", "node.yaml", "- --host-name\n", "- --hostname\n", "skillfs has no flag --hostname (CLI.md)"},
	{"no keeper", "node.yaml", "            - --keeper\n            - /run/skillfs/keeper.sock\n", "", "serve has no --keeper"},
	{"probe of another home", "node.yaml", "startupProbe:\n            exec:\n              command: [/usr/local/bin/skillfs, --home, /var/lib/skillfs,",
		"startupProbe:\n            exec:\n              command: [/usr/local/bin/skillfs, --home, /var/lib/skillfs2,", "startup probe asks the daemon of"},
	{"undefined variable", "node.yaml", "            - $(NODE_NAME)", "            - $(NODENAME)", "$(NODENAME), which the container's env does not set"},
	{"no memory limit", "node.yaml", "              cpu: \"4\"\n              memory: 2Gi\n", "              cpu: \"4\"\n", "no memory limits"},
	{"request above limit", "node.yaml", "              cpu: 100m\n              memory: 256Mi\n", "              cpu: \"8\"\n              memory: 256Mi\n", "cpu request 8 above its limit 4"},
	{"surge", "node.yaml", "maxSurge: 0", "maxSurge: 1", "maxSurge 0"},
	{"grace beyond the timeout", "node.yaml", "terminationGracePeriodSeconds: 15", "terminationGracePeriodSeconds: 90", "not below the fuse-request-timeout"},
	{"selector misses the template", "node.yaml", "    metadata:\n      labels:\n        app.kubernetes.io/name: skillfs\n        app.kubernetes.io/component: node\n",
		"    metadata:\n      labels:\n        app.kubernetes.io/name: skillfs\n        app.kubernetes.io/component: daemon\n", "does not match its template's labels"},
	{"not critical", "node.yaml", "priorityClassName: system-node-critical", "priorityClassName: high", "priorityClassName"},
	{"registry in an image", "keeper.yaml", "image: skillfs:0.1", "image: mirror/skillfs:0.1", "want a bare name"},
	{"token mounted", "namespace.yaml", "automountServiceAccountToken: false", "automountServiceAccountToken: true", "mounts a token"},
	{"config map missing", "config.yaml", "name: skillfs-config\n", "name: skillfs-settings\n", "no ConfigMap skillfs/skillfs-config"},

	// The daemon's configuration file.
	{"config key not a flag", "config.yaml", "    agent-path: /home/gem/skills", "    agent_path: /home/gem/skills", `"agent_path" is not a flag of skillfs serve`},
	{"config value of the wrong kind", "config.yaml", "    examples: true", "    examples: yes-please", "examples: \"yes-please\": want true or false"},
	{"config value not one of its flag's", "config.yaml", "    log-format: json", "    log-format: jsn", `log-format: "jsn": want one of text, json`},
	{"config key twice", "config.yaml", "    log-format: json\n", "    log-format: json\n    log-format: text\n", `"log-format" given twice`},
	{"agent path elsewhere", "config.yaml", "    agent-path: /home/gem/skills", "    agent-path: /opt/skills", "serve's agent-path (what prompts say) is /opt/skills"},

	// The plugin.
	{"unknown plugin flag", "node.yaml", "--policy=/etc/skillfs-csi/policy.yaml", "--policy-file=/etc/skillfs-csi/policy.yaml", "skillfs-csi has no flag --policy-file"},
	{"plugin privileged", "node.yaml", "          # socket the daemon makes in it is that group's.\n          securityContext:\n",
		"          # socket the daemon makes in it is that group's.\n          securityContext:\n            privileged: true\n", "privileged: only the daemon"},
	{"plugin escalates", "node.yaml", "          # socket the daemon makes in it is that group's.\n          securityContext:\n            runAsUser: 0\n            allowPrivilegeEscalation: false\n",
		"          # socket the daemon makes in it is that group's.\n          securityContext:\n            runAsUser: 0\n            allowPrivilegeEscalation: true\n", "allowPrivilegeEscalation"},
	{"plugin socket elsewhere", "node.yaml", "            path: /var/lib/kubelet/plugins/csi.skillfs\n", "            path: /var/lib/kubelet/plugins/skillfs\n", "want /var/lib/kubelet/plugins/csi.skillfs/csi.sock"},
	{"plugin without FSETID", "node.yaml", "add: [CHOWN, FSETID]", "add: [CHOWN]", "want drop [ALL] and add [CHOWN FSETID]"},
	{"plugin with more", "node.yaml", "add: [CHOWN, FSETID]", "add: [CHOWN, FSETID, SYS_ADMIN]", "want drop [ALL] and add [CHOWN FSETID]"},
	{"sidecar with a capability", "node.yaml", "            - --probe-timeout=3s\n          securityContext:\n            runAsUser: 0\n            allowPrivilegeEscalation: false\n            readOnlyRootFilesystem: true\n            capabilities:\n              drop: [ALL]\n",
		"            - --probe-timeout=3s\n          securityContext:\n            runAsUser: 0\n            allowPrivilegeEscalation: false\n            readOnlyRootFilesystem: true\n            capabilities:\n              drop: [ALL]\n              add: [NET_RAW]\n", "want drop [ALL] and add []"},
	{"plugin's pods folder a copy", "node.yaml", "              mountPath: /var/lib/kubelet/pods\n              mountPropagation: HostToContainer\n", "              mountPath: /var/lib/kubelet/pods\n", "the pods folder is not the node's, HostToContainer"},
	{"node id not the node's", "node.yaml", "--node-id=$(NODE_ID)", "--node-id=node-1", "is not the node's name"},
	{"daemon socket elsewhere", "node.yaml", "--skillfs-socket=/var/lib/skillfs/skillfs.sock", "--skillfs-socket=/run/skillfs/skillfs.sock", "not the daemon's socket"},
	{"policy not mounted", "node.yaml", "--policy=/etc/skillfs-csi/policy.yaml", "--policy=/etc/skillfs/policy.yaml", "--policy /etc/skillfs/policy.yaml: not in a ConfigMap's volume"},

	// The sidecars.
	{"registration path", "node.yaml", "--kubelet-registration-path=/var/lib/kubelet/plugins/csi.skillfs/csi.sock",
		"--kubelet-registration-path=/var/lib/kubelet/plugins/csi-skillfs/csi.sock", "--kubelet-registration-path"},
	{"registrar address", "node.yaml", "            - --csi-address=/csi/csi.sock\n            - --kubelet", "            - --csi-address=/run/csi.sock\n            - --kubelet", "is not the plugin's socket"},
	{"registration folder", "node.yaml", "            path: /var/lib/kubelet/plugins_registry\n", "            path: /var/lib/kubelet/plugins-registry\n", "registration folder"},
	{"unknown sidecar flag", "node.yaml", "--probe-timeout=3s", "--timeout=3s", "has no flag --timeout"},
	{"probe port", "node.yaml", "--http-endpoint=:9808", "--http-endpoint=:9810", "serves health on 9810"},

	// The keeper.
	{"keeper socket elsewhere", "keeper.yaml", "--socket, /run/skillfs/keeper.sock", "--socket, /run/skillfs/k.sock", "not the same"},
	{"keeper replaced by the controller", "keeper.yaml", "type: OnDelete", "type: RollingUpdate", "OnDelete"},
	{"keeper runs something else", "keeper.yaml", "command: [/usr/local/bin/skillfs, keeper,", "command: [/usr/local/bin/skillfs, serve,", "skillfs serve has no flag --socket"},

	// The policy and the example.
	{"policy refuses the example", "policy.yaml", "users: [alice, bob]", "users: [bob]", "the policy refuses the example"},
	{"policy of another namespace", "policy.yaml", "- namespace: agents", "- namespace: agent", "the policy refuses the example"},
	{"policy field misspelt", "policy.yaml", "serviceAccounts: [runner]", "serviceAccount: [runner]", "the claims policy does not parse"},
	{"unknown volume attribute", "examples/pod.yaml", "          skills: release-notes", "          skill: release-notes", `volume attribute "skill"`},
	{"api socket out of the pod's reach", "examples/pod.yaml", "    fsGroup: 1000\n", "", "an api volume but no fsGroup"},
	{"unknown volume kind", "examples/pod.yaml", "kind: api\n", "kind: socket\n", `kind "socket"`},
	{"writable view", "examples/pod.yaml", "      csi:\n        driver: csi.skillfs\n        readOnly: true\n        volumeAttributes:\n          user",
		"      csi:\n        driver: csi.skillfs\n        readOnly: false\n        volumeAttributes:\n          user", "not readOnly"},
	{"example service account missing", "examples/pod.yaml", "  serviceAccountName: runner", "  serviceAccountName: agent", `service account "agent"`},

	// The kustomization.
	{"resource not listed", "kustomization.yaml", "  - node.yaml\n", "", "node.yaml is not listed"},
	{"image tag drifts", "kustomization.yaml", "newTag: v2.15.0", "newTag: v2.14.0", "newTag"},

	// The image.
	{"plugin with cgo", "Containerfile", "RUN CGO_ENABLED=0 go build", "RUN CGO_ENABLED=1 go build", "/usr/local/bin/skillfs-csi: want it built with"},
	{"other C library", "Containerfile", "FROM debian:trixie-slim", "FROM debian:bookworm-slim", "built on Debian trixie, run on bookworm"},
	{"old Go", "Containerfile", "golang:1.26-trixie", "golang:1.25-trixie", "older than go.mod's"},
	{"stop by SIGINT", "Containerfile", "STOPSIGNAL SIGTERM", "STOPSIGNAL SIGINT", "STOPSIGNAL SIGINT"},
	{"no git", "Containerfile", "fuse3 git ca-certificates", "fuse3 ca-certificates", "lacks git"},
	{"binary elsewhere", "Containerfile", "/out/skillfs-csi /usr/local/bin/", "/out/skillfs-csi /usr/bin/", "want it built with"},

	// The references the flags come from.
	{"flag gone from the reference", "CLI.md", "| `--agent-path PATH` |", "| `--agent-dir PATH` |", `"agent-path" is not a flag of skillfs serve`},
}
