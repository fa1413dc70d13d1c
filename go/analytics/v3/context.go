package analytics

import (
	"encoding/json"
	"net"
	"reflect"
)

// Context is a call's context (the spec's common fields): where the call
// comes from, not attributes of the user. Zero fields are left out; the
// core sets "library" itself.
type Context struct {
	App       AppInfo      `json:"app,omitempty"`
	Campaign  CampaignInfo `json:"campaign,omitempty"`
	Device    DeviceInfo   `json:"device,omitempty"`
	Library   LibraryInfo  `json:"library,omitempty"`
	Location  LocationInfo `json:"location,omitempty"`
	Network   NetworkInfo  `json:"network,omitempty"`
	OS        OSInfo       `json:"os,omitempty"`
	Page      PageInfo     `json:"page,omitempty"`
	Referrer  ReferrerInfo `json:"referrer,omitempty"`
	Screen    ScreenInfo   `json:"screen,omitempty"`
	IP        net.IP       `json:"ip,omitempty"`
	Direct    bool         `json:"direct,omitempty"`
	Locale    string       `json:"locale,omitempty"`
	GroupID   string       `json:"groupId,omitempty"`
	Timezone  string       `json:"timezone,omitempty"`
	UserAgent string       `json:"userAgent,omitempty"`
	Traits    Traits       `json:"traits,omitempty"`

	// Extra holds fields the struct does not name; they are written
	// beside the others (a named field wins over an Extra key).
	Extra map[string]interface{} `json:"-"`
}

// AppInfo is context.app.
type AppInfo struct {
	Name      string `json:"name,omitempty"`
	Version   string `json:"version,omitempty"`
	Build     string `json:"build,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// CampaignInfo is context.campaign.
type CampaignInfo struct {
	Name    string `json:"name,omitempty"`
	Source  string `json:"source,omitempty"`
	Medium  string `json:"medium,omitempty"`
	Term    string `json:"term,omitempty"`
	Content string `json:"content,omitempty"`
}

// DeviceInfo is context.device.
type DeviceInfo struct {
	Id            string `json:"id,omitempty"`
	Manufacturer  string `json:"manufacturer,omitempty"`
	Model         string `json:"model,omitempty"`
	Name          string `json:"name,omitempty"`
	Type          string `json:"type,omitempty"`
	Version       string `json:"version,omitempty"`
	AdvertisingID string `json:"advertisingId,omitempty"`
}

// LibraryInfo is context.library. The core sets it on every message (to
// callpost's name and version), whatever a call says.
type LibraryInfo struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// LocationInfo is context.location.
type LocationInfo struct {
	City      string  `json:"city,omitempty"`
	Country   string  `json:"country,omitempty"`
	Region    string  `json:"region,omitempty"`
	Latitude  float64 `json:"latitude,omitempty"`
	Longitude float64 `json:"longitude,omitempty"`
	Speed     float64 `json:"speed,omitempty"`
}

// NetworkInfo is context.network.
type NetworkInfo struct {
	Bluetooth bool   `json:"bluetooth,omitempty"`
	Cellular  bool   `json:"cellular,omitempty"`
	WIFI      bool   `json:"wifi,omitempty"`
	Carrier   string `json:"carrier,omitempty"`
}

// OSInfo is context.os.
type OSInfo struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// PageInfo is context.page.
type PageInfo struct {
	Hash     string `json:"hash,omitempty"`
	Path     string `json:"path,omitempty"`
	Referrer string `json:"referrer,omitempty"`
	Search   string `json:"search,omitempty"`
	Title    string `json:"title,omitempty"`
	URL      string `json:"url,omitempty"`
}

// ReferrerInfo is context.referrer.
type ReferrerInfo struct {
	Type string `json:"type,omitempty"`
	Name string `json:"name,omitempty"`
	URL  string `json:"url,omitempty"`
	Link string `json:"link,omitempty"`
}

// ScreenInfo is context.screen.
type ScreenInfo struct {
	Density int `json:"density,omitempty"`
	Width   int `json:"width,omitempty"`
	Height  int `json:"height,omitempty"`
}

// fields is the context as the JSON object it is sent as: Extra's keys,
// then every non-zero field (encoding/json's omitempty does not leave out
// a zero struct, so the fields are picked here).
func (ctx *Context) fields() map[string]interface{} {
	m := make(map[string]interface{}, 8+len(ctx.Extra))
	for k, v := range ctx.Extra {
		m[k] = v
	}
	put := func(key string, nonZero bool, v interface{}) {
		if nonZero {
			m[key] = v
		}
	}
	put("app", ctx.App != AppInfo{}, ctx.App)
	put("campaign", ctx.Campaign != CampaignInfo{}, ctx.Campaign)
	put("device", ctx.Device != DeviceInfo{}, ctx.Device)
	put("library", ctx.Library != LibraryInfo{}, ctx.Library)
	put("location", ctx.Location != LocationInfo{}, ctx.Location)
	put("network", ctx.Network != NetworkInfo{}, ctx.Network)
	put("os", ctx.OS != OSInfo{}, ctx.OS)
	put("page", ctx.Page != PageInfo{}, ctx.Page)
	put("referrer", ctx.Referrer != ReferrerInfo{}, ctx.Referrer)
	put("screen", ctx.Screen != ScreenInfo{}, ctx.Screen)
	put("ip", len(ctx.IP) > 0, ctx.IP)
	put("direct", ctx.Direct, ctx.Direct)
	put("locale", ctx.Locale != "", ctx.Locale)
	put("groupId", ctx.GroupID != "", ctx.GroupID)
	put("timezone", ctx.Timezone != "", ctx.Timezone)
	put("userAgent", ctx.UserAgent != "", ctx.UserAgent)
	put("traits", len(ctx.Traits) > 0, ctx.Traits)
	return m
}

// value is what the context is written as: Extra itself when no named
// field is set (the common case, and no copy of it), else fields().
func (ctx *Context) value() interface{} {
	named := *ctx
	named.Extra = nil
	if named.IP == nil && named.Traits == nil && reflect.ValueOf(named).IsZero() {
		return ctx.Extra
	}
	return ctx.fields()
}

// MarshalJSON writes the context as one object, Extra's keys beside the
// named fields.
func (ctx Context) MarshalJSON() ([]byte, error) {
	return json.Marshal(ctx.value())
}

// contextValue is what a call's context is sent as: the call's own, over
// the client's default context (the call's keys win), or nothing.
func contextValue(defaults, own *Context) interface{} {
	switch {
	case defaults == nil && own == nil:
		return nil
	case defaults == nil:
		return own.value()
	}
	m := defaults.fields()
	if own != nil {
		for k, v := range own.fields() {
			m[k] = v
		}
	}
	return m
}
