"""Encrypted PDFs that open without a password (ISO 32000-1 §7.6): the standard security handler with
an empty user password and RC4 (revisions 2-4, V 1, 2 or 4 with a V2 crypt filter), as older writers
make files with permission flags only. The key is checked against /U, so a file that does need a
password is never read as garbage. AES (V4 AESV2, V5) is not read: pure-Python AES would be slow and
long, and such files are refused as encrypted, as are other security handlers."""

import hashlib

# Algorithm 2's padding: the empty password padded to 32 bytes is this string itself.
_PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")


def rc4(key: bytes, data) -> bytes:
    s, j = list(range(256)), 0
    for i in range(256):
        j = (j + s[i] + key[i % len(key)]) & 0xFF
        s[i], s[j] = s[j], s[i]
    out, i, j = bytearray(len(data)), 0, 0
    for k, byte in enumerate(data):
        i = (i + 1) & 0xFF
        j = (j + s[i]) & 0xFF
        s[i], s[j] = s[j], s[i]
        out[k] = byte ^ s[(s[i] + s[j]) & 0xFF]
    return bytes(out)


def empty_password_key(encrypt: dict, crypt_filter: dict, file_id: bytes) -> bytes | None:
    """The file key when the user password is empty and the cipher RC4, else None. `crypt_filter`:
    the V4 dictionary's /StdCF ({} otherwise)."""
    version, revision = encrypt.get("V", 0), encrypt.get("R")
    owner, user, permissions = encrypt.get("O"), encrypt.get("U"), encrypt.get("P")
    if encrypt.get("Filter") != "Standard" or not (isinstance(owner, bytes) and isinstance(user, bytes)):
        return None
    if not isinstance(permissions, int) or revision not in (2, 3, 4):
        return None
    if version == 4 and crypt_filter.get("CFM") == "V2":
        length = crypt_filter.get("Length", 16)
        length = length // 8 if isinstance(length, int) and length > 16 else length  # bits, from some writers
    elif version in (1, 2):
        length = encrypt.get("Length", 40) // 8 if isinstance(encrypt.get("Length", 40), int) else 5
    else:
        return None
    n = 5 if revision == 2 else length
    if not isinstance(n, int) or not 5 <= n <= 16:
        return None
    digest = hashlib.md5(_PAD + owner[:32] + (permissions & 0xFFFFFFFF).to_bytes(4, "little") + file_id)
    if revision == 4 and encrypt.get("EncryptMetadata") is False:
        digest.update(b"\xff\xff\xff\xff")
    key = digest.digest()[:n]
    if revision >= 3:
        for _ in range(50):
            key = hashlib.md5(key).digest()[:n]
    if revision == 2:
        return key if rc4(key, _PAD) == user[:32] else None
    check = rc4(key, hashlib.md5(_PAD + file_id).digest())
    for i in range(1, 20):
        check = rc4(bytes(b ^ i for b in key), check)
    return key if check == user[:16] else None


def object_key(key: bytes, num: int, gen: int) -> bytes:
    return hashlib.md5(key + num.to_bytes(3, "little") + gen.to_bytes(2, "little")).digest()[: min(len(key) + 5, 16)]


def decrypt_strings(obj, key: bytes):
    """`obj` with every string in it decrypted (an object's streams are decrypted where read)."""
    if isinstance(obj, bytes):
        return rc4(key, obj)
    if isinstance(obj, list):
        return [decrypt_strings(item, key) for item in obj]
    if isinstance(obj, dict):
        return {k: decrypt_strings(v, key) for k, v in obj.items()}
    return obj
