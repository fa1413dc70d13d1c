package analytics

// Integrations switch destinations on or off for one call: keys are
// destination names (case-sensitive), "All" every destination.
//
//	analytics.NewIntegrations().DisableAll().Enable("Mixpanel")
type Integrations map[string]interface{}

// NewIntegrations is an empty Integrations: every destination on.
func NewIntegrations() Integrations { return make(Integrations, 10) }

// EnableAll sets "All" to true.
func (i Integrations) EnableAll() Integrations { return i.Enable("All") }

// DisableAll sets "All" to false: only destinations set true receive the
// call.
func (i Integrations) DisableAll() Integrations { return i.Disable("All") }

// Enable turns destination name on.
func (i Integrations) Enable(name string) Integrations { return i.Set(name, true) }

// Disable turns destination name off.
func (i Integrations) Disable(name string) Integrations { return i.Set(name, false) }

// Set sets destination name to value (a bool, or a destination's options).
func (i Integrations) Set(name string, value interface{}) Integrations {
	i[name] = value
	return i
}
