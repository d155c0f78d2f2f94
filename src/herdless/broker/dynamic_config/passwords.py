"""Passwords among dynamic broker configs, encrypted where they are stored with the
broker's `password.encoder.secret`, in the format of Kafka's EncryptingPasswordEncoder
(AES/CBC/PKCS5Padding under a PBKDF2WithHmacSHA512 key, 128 bits, 4096 iterations), so
a znode Kafka wrote decodes here and one written here decodes in Kafka.

Kafka refuses to store a password config when no secret is set, and so does herdless:
a keystore password in plain text in ZooKeeper would be readable by anyone who can
read the znode.
"""

from __future__ import annotations

import base64
import os

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

_CIPHER = "AES/CBC/PKCS5Padding"
_KEY_FACTORY = "PBKDF2WithHmacSHA512"
_KEY_LENGTH_BITS = 128
_ITERATIONS = 4096
_SALT_BYTES = 256


class PasswordDecodeError(ValueError):
    """A stored password that this secret cannot decode."""


def _key(secret: str, salt: bytes, length_bits: int, iterations: int) -> bytes:
    kdf = PBKDF2HMAC(hashes.SHA512(), length_bits // 8, salt, iterations)
    return kdf.derive(secret.encode())


def encode_password(secret: str, password: str) -> str:
    salt = os.urandom(_SALT_BYTES)
    iv = os.urandom(16)
    padder = padding.PKCS7(128).padder()
    plain = padder.update(password.encode()) + padder.finalize()
    key = _key(secret, salt, _KEY_LENGTH_BITS, _ITERATIONS)
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    encrypted = encryptor.update(plain) + encryptor.finalize()
    fields = {
        "keyFactoryAlgorithm": _KEY_FACTORY,
        "cipherAlgorithm": _CIPHER,
        "keyLength": str(_KEY_LENGTH_BITS),
        "salt": base64.b64encode(salt).decode(),
        "iterations": str(_ITERATIONS),
        "encryptedPassword": base64.b64encode(encrypted).decode(),
        "passwordLength": str(len(password)),
        "initializationVector": base64.b64encode(iv).decode(),
    }
    return ",".join(f"{k}:{v}" for k, v in fields.items())


def decode_password(secret: str, encoded: str) -> str:
    """PasswordDecodeError if `encoded` is not one this secret encrypted."""
    try:
        fields = dict(item.split(":", 1) for item in encoded.split(","))
        if fields.get("cipherAlgorithm", _CIPHER) != _CIPHER:
            raise PasswordDecodeError(f"cipher {fields['cipherAlgorithm']} is not served")
        if fields.get("keyFactoryAlgorithm", _KEY_FACTORY) != _KEY_FACTORY:
            raise PasswordDecodeError(f"key factory {fields['keyFactoryAlgorithm']} is not served")
        key = _key(
            secret,
            base64.b64decode(fields["salt"]),
            int(fields["keyLength"]),
            int(fields["iterations"]),
        )
        iv = base64.b64decode(fields["initializationVector"])
        decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
        plain = decryptor.update(base64.b64decode(fields["encryptedPassword"]))
        plain += decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        password = (unpadder.update(plain) + unpadder.finalize()).decode()
    except (KeyError, ValueError) as exc:
        raise PasswordDecodeError(f"Password could not be decoded: {exc}") from None
    if len(password) != int(fields["passwordLength"]):
        raise PasswordDecodeError("Password could not be decoded, sanity check of length failed")
    return password
