package analytics

import "time"

// Traits are an identify or group call's free-form traits. The setters
// name the spec's common ones and return the map, to chain:
//
//	analytics.NewTraits().SetFirstName("Luke").SetLastName("Skywalker").Set("Role", "Jedi")
type Traits map[string]interface{}

// NewTraits is an empty Traits.
func NewTraits() Traits { return make(Traits, 10) }

// SetAddress sets "address".
func (t Traits) SetAddress(address string) Traits { return t.Set("address", address) }

// SetAge sets "age".
func (t Traits) SetAge(age int) Traits { return t.Set("age", age) }

// SetAvatar sets "avatar".
func (t Traits) SetAvatar(url string) Traits { return t.Set("avatar", url) }

// SetBirthday sets "birthday".
func (t Traits) SetBirthday(date time.Time) Traits { return t.Set("birthday", date) }

// SetCreatedAt sets "createdAt".
func (t Traits) SetCreatedAt(date time.Time) Traits { return t.Set("createdAt", date) }

// SetDescription sets "description".
func (t Traits) SetDescription(desc string) Traits { return t.Set("description", desc) }

// SetEmail sets "email".
func (t Traits) SetEmail(email string) Traits { return t.Set("email", email) }

// SetFirstName sets "firstName".
func (t Traits) SetFirstName(firstName string) Traits { return t.Set("firstName", firstName) }

// SetGender sets "gender".
func (t Traits) SetGender(gender string) Traits { return t.Set("gender", gender) }

// SetLastName sets "lastName".
func (t Traits) SetLastName(lastName string) Traits { return t.Set("lastName", lastName) }

// SetName sets "name".
func (t Traits) SetName(name string) Traits { return t.Set("name", name) }

// SetPhone sets "phone".
func (t Traits) SetPhone(phone string) Traits { return t.Set("phone", phone) }

// SetTitle sets "title".
func (t Traits) SetTitle(title string) Traits { return t.Set("title", title) }

// SetUsername sets "username".
func (t Traits) SetUsername(username string) Traits { return t.Set("username", username) }

// SetWebsite sets "website".
func (t Traits) SetWebsite(url string) Traits { return t.Set("website", url) }

// Set sets any trait.
func (t Traits) Set(field string, value interface{}) Traits {
	t[field] = value
	return t
}
