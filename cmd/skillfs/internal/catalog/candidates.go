package catalog

import skillsource "skillfs/skills/source"

// available describes a skill a source holds for a listing.
func available(f skillsource.Found) Available {
	a := Available{Name: f.Name, Slug: f.Slug(), Path: f.Rel, Plugin: f.Plugin}
	if f.Manifest != nil {
		a.Name, a.Description = skillsource.DisplayName(f.Plugin, f.Manifest.Name), f.Manifest.Description
	}
	if f.Err != nil {
		a.Status, a.Error = StatusRefused, f.Err.Error()
	}
	return a
}

// describe describes the skills a source holds for a listing.
func describe(fs []skillsource.Found) []Available {
	out := make([]Available, len(fs))
	for i, f := range fs {
		out[i] = available(f)
	}
	return out
}
