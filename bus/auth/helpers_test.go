package auth_test

import "github.com/nats-io/nkeys"

func nkeysFromSeed(seed string) (string, error) {
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		return "", err
	}
	return kp.PublicKey()
}
