package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"golang.org/x/time/rate"
)

// Named API keys (--keys FILE): each a name, a secret, and limits. The file is JSON:
//
//	{"keys": [
//	  {"name": "web", "secret_sha256": "<64 hex digits>", "rate": 5, "burst": 10, "max_in_flight": 4},
//	  {"name": "batch", "secret": "<the token itself>", "max_priority": 5},
//	  {"name": "ops", "secret": "<the token itself>", "admin": true}
//	]}
//
// --token, when set as well, is one more key: "token", an admin without limits. The file may
// hold a secret's SHA-256 rather than the secret: the server compares hashes anyway, in
// constant time over every key, so a match takes as long as a miss and says nothing of which
// key came near.

// APIKey is one key of the --keys file.
type APIKey struct {
	Name         string  `json:"name"`                    // in the job's key field, metrics and the gallery: [a-z0-9_.-], at most 64
	Secret       string  `json:"secret,omitempty"`        // the bearer token itself (at least 16 characters), or
	SecretSHA256 string  `json:"secret_sha256,omitempty"` // its SHA-256, 64 hex digits (printf %s TOKEN | sha256sum)
	Rate         float64 `json:"rate,omitempty"`          // requests per second to POST and DELETE, per replica; 0: no limit
	Burst        int     `json:"burst,omitempty"`         // requests above the rate at once (default: the rate, at least 1)
	MaxInFlight  int     `json:"max_in_flight,omitempty"` // jobs queued or running at once, over all replicas; 0: no limit
	Admin        bool    `json:"admin,omitempty"`         // reads, cancels and deletes every key's jobs
	// MaxPriority is the highest queue priority the key's requests may ask, 0 to 10; nil: 10
	// for an admin, 0 for any other key, so that a tenant cannot move its jobs ahead of the
	// others' unless the operator says so.
	MaxPriority *int `json:"max_priority,omitempty"`
}

// tokenKeyName is the name --token's key goes by.
const tokenKeyName = "token"

var keyName = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)

// loadKeys reads --keys into APIKeys and checks every key, naming the file, the key and the
// field at fault (keys set directly, by tests, are checked the same).
func (c *Config) loadKeys() error {
	where := "keys"
	if c.KeysFile != "" {
		where = "--keys " + c.KeysFile
		data, err := os.ReadFile(c.KeysFile)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		var file struct {
			Keys []APIKey `json:"keys"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&file); err != nil {
			return fmt.Errorf("%s: %v (allowed: {\"keys\": [{\"name\", \"secret\" or \"secret_sha256\", \"rate\", \"burst\", \"max_in_flight\", \"max_priority\", \"admin\"}]})", where, err)
		}
		if len(file.Keys) == 0 {
			return fmt.Errorf("%s: no keys (leave --keys out for a server without them)", where)
		}
		c.APIKeys = file.Keys
	}
	names, hashes := map[string]bool{}, map[[32]byte]bool{}
	if c.Token != "" {
		names[tokenKeyName], hashes[sha256.Sum256([]byte(c.Token))] = true, true
	}
	for i := range c.APIKeys {
		k := &c.APIKeys[i]
		if err := k.check(); err != nil {
			return fmt.Errorf("%s: key %d (%q): %w", where, i+1, k.Name, err)
		}
		if names[k.Name] {
			return fmt.Errorf("%s: key %d: the name %q is taken (by another key, or %q by --token)", where, i+1, k.Name, tokenKeyName)
		}
		h := k.hash()
		if hashes[h] {
			return fmt.Errorf("%s: key %d (%q): the same secret as another key (or --token): each key needs its own", where, i+1, k.Name)
		}
		names[k.Name], hashes[h] = true, true
	}
	return nil
}

// check refuses a key that cannot work, saying which field and what is allowed.
func (k *APIKey) check() error {
	switch {
	case !keyName.MatchString(k.Name):
		return errors.New("name: allowed 1 to 64 of a-z, 0-9, _ . -")
	case (k.Secret == "") == (k.SecretSHA256 == ""):
		return errors.New("give secret or secret_sha256, one of them")
	case k.Secret != "" && len(k.Secret) < 16:
		return errors.New("secret: at least 16 characters")
	case k.SecretSHA256 != "" && !isSHA256Hex(k.SecretSHA256):
		return errors.New("secret_sha256: 64 hex digits")
	case k.Rate < 0 || k.Rate > 1e6:
		return fmt.Errorf("rate %g: allowed 0 (no limit) to 1000000 requests per second", k.Rate)
	case k.Burst < 0 || k.Burst > 1e6:
		return fmt.Errorf("burst %d: allowed 0 (as the rate) to 1000000", k.Burst)
	case k.Burst > 0 && k.Rate == 0:
		return errors.New("burst without a rate: set rate too")
	case k.MaxInFlight < 0 || k.MaxInFlight > 1e6:
		return fmt.Errorf("max_in_flight %d: allowed 0 (no limit) to 1000000", k.MaxInFlight)
	case k.MaxPriority != nil && (*k.MaxPriority < 0 || *k.MaxPriority > maxPriority):
		return fmt.Errorf("max_priority %d: allowed 0 to %d (the highest priority the key may ask; leave it out for %d on an admin, 0 on other keys)", *k.MaxPriority, maxPriority, maxPriority)
	}
	return nil
}

// highestPriority is the highest priority the key may ask: its max_priority, else the top of
// the range for an admin and the default priority, 0, for any other key.
func (k *APIKey) highestPriority() int {
	switch {
	case k.MaxPriority != nil:
		return *k.MaxPriority
	case k.Admin:
		return maxPriority
	}
	return 0
}

func isSHA256Hex(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size
}

// hash is the SHA-256 of the key's secret.
func (k *APIKey) hash() [32]byte {
	if k.SecretSHA256 != "" {
		var h [32]byte
		hex.Decode(h[:], []byte(strings.ToLower(k.SecretSHA256))) //nolint:errcheck // checked: 64 hex digits
		return h
	}
	return sha256.Sum256([]byte(k.Secret))
}

// namedKey is a key as the server holds it: its hash and, when it has a rate, its limiter
// (this replica's: rates are per replica; in-flight limits are counted in the store).
type namedKey struct {
	APIKey
	sum     [32]byte
	limiter *rate.Limiter
}

// keyring is every key the server takes: --keys and --token.
type keyring struct {
	keys []*namedKey
	m    *keyMetrics
	// fromFile: a --keys file names the keys, so every job route needs one; with --token
	// alone, reads stay open, as they were before named keys.
	fromFile bool
}

func newKeyring(cfg Config, m *keyMetrics) *keyring {
	r := &keyring{fromFile: len(cfg.APIKeys) > 0, m: m}
	if cfg.Token != "" {
		r.keys = append(r.keys, &namedKey{APIKey: APIKey{Name: tokenKeyName, Admin: true}, sum: sha256.Sum256([]byte(cfg.Token))})
	}
	for _, k := range cfg.APIKeys {
		nk := &namedKey{APIKey: k, sum: k.hash()}
		if k.Rate > 0 {
			burst := k.Burst
			if burst == 0 {
				burst = max(1, int(k.Rate))
			}
			nk.limiter = rate.NewLimiter(rate.Limit(k.Rate), burst)
			nk.Burst = burst
		}
		r.keys = append(r.keys, nk)
	}
	return r
}

// open reports whether the server has no keys: everyone may do everything, as before keys.
func (r *keyring) open() bool { return len(r.keys) == 0 }

// match returns the key whose secret is token, comparing with every key in constant time.
func (r *keyring) match(token string) *namedKey {
	sum := sha256.Sum256([]byte(token))
	var found *namedKey
	for _, k := range r.keys {
		if subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1 {
			found = k
		}
	}
	return found
}
