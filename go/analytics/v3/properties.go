package analytics

// Properties are a track, page or screen call's free-form properties. The
// setters name the spec's common ones and return the map, to chain:
//
//	analytics.NewProperties().SetRevenue(10.0).SetCurrency("USD")
type Properties map[string]interface{}

// NewProperties is an empty Properties.
func NewProperties() Properties { return make(Properties, 10) }

// SetRevenue sets "revenue".
func (p Properties) SetRevenue(revenue float64) Properties { return p.Set("revenue", revenue) }

// SetCurrency sets "currency".
func (p Properties) SetCurrency(currency string) Properties { return p.Set("currency", currency) }

// SetValue sets "value".
func (p Properties) SetValue(value float64) Properties { return p.Set("value", value) }

// SetPath sets "path".
func (p Properties) SetPath(path string) Properties { return p.Set("path", path) }

// SetReferrer sets "referrer".
func (p Properties) SetReferrer(referrer string) Properties { return p.Set("referrer", referrer) }

// SetTitle sets "title".
func (p Properties) SetTitle(title string) Properties { return p.Set("title", title) }

// SetURL sets "url".
func (p Properties) SetURL(url string) Properties { return p.Set("url", url) }

// SetName sets "name".
func (p Properties) SetName(name string) Properties { return p.Set("name", name) }

// SetCategory sets "category".
func (p Properties) SetCategory(category string) Properties { return p.Set("category", category) }

// SetSKU sets "sku".
func (p Properties) SetSKU(sku string) Properties { return p.Set("sku", sku) }

// SetPrice sets "price".
func (p Properties) SetPrice(price float64) Properties { return p.Set("price", price) }

// SetProductId sets "id".
func (p Properties) SetProductId(id string) Properties { return p.Set("id", id) }

// SetOrderId sets "orderId".
func (p Properties) SetOrderId(id string) Properties { return p.Set("orderId", id) }

// SetTotal sets "total".
func (p Properties) SetTotal(total float64) Properties { return p.Set("total", total) }

// SetSubtotal sets "subtotal".
func (p Properties) SetSubtotal(subtotal float64) Properties { return p.Set("subtotal", subtotal) }

// SetShipping sets "shipping".
func (p Properties) SetShipping(shipping float64) Properties { return p.Set("shipping", shipping) }

// SetTax sets "tax".
func (p Properties) SetTax(tax float64) Properties { return p.Set("tax", tax) }

// SetDiscount sets "discount".
func (p Properties) SetDiscount(discount float64) Properties { return p.Set("discount", discount) }

// SetCoupon sets "coupon".
func (p Properties) SetCoupon(coupon string) Properties { return p.Set("coupon", coupon) }

// SetProducts sets "products".
func (p Properties) SetProducts(products ...Product) Properties { return p.Set("products", products) }

// SetRepeat sets "repeat".
func (p Properties) SetRepeat(repeat bool) Properties { return p.Set("repeat", repeat) }

// Set sets any property.
func (p Properties) Set(name string, value interface{}) Properties {
	p[name] = value
	return p
}

// Product is a product of the e-commerce spec, with its keys (analytics-go
// wrote SKU as "sky").
type Product struct {
	ID    string  `json:"id,omitempty"`
	SKU   string  `json:"sku,omitempty"`
	Name  string  `json:"name,omitempty"`
	Price float64 `json:"price"`
}
