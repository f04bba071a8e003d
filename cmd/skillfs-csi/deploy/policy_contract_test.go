package deploy

import (
	"bytes"
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"
)

// contractPolicy is the claims policy's documented shape, read strictly.
type contractPolicy struct {
	Claims []struct {
		Namespace       string   `yaml:"namespace"`
		ServiceAccounts []string `yaml:"serviceAccounts"`
		Users           []string `yaml:"users"`
		Skills          []string `yaml:"skills"`
	} `yaml:"claims"`
}

func parsePolicy(data []byte) (interface {
	allows(namespace, serviceAccount, user string, skills []string) error
}, error) {
	var pol contractPolicy
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&pol); err != nil {
		return nil, err
	}
	return pol, nil
}

func (pol contractPolicy) allows(namespace, serviceAccount, user string, skills []string) error {
	any := func(l []string, s string) bool { return slices.Contains(l, s) || slices.Contains(l, "*") }
	for _, r := range pol.Claims {
		if (r.Namespace != namespace && r.Namespace != "*") || !any(r.ServiceAccounts, serviceAccount) || !any(r.Users, user) {
			continue
		}
		if r.Skills == nil || !slices.ContainsFunc(skills, func(s string) bool { return !any(r.Skills, s) }) {
			return nil
		}
	}
	return fmt.Errorf("namespace %s, service account %s: user %s with skills %v refused", namespace, serviceAccount, user, skills)
}
