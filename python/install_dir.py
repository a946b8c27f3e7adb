"""Print the directory where `make install` puts the nsbox package for this
Python and the install prefix given as the argument: a directory this
Python searches when there is one for the prefix (Debian: /usr/local/lib/
python3.X/dist-packages for /usr/local, /usr/lib/python3/dist-packages for
/usr), else PREFIX/lib/python3.X/site-packages (add it to PYTHONPATH)."""
import os
import sys
import sysconfig

prefix = os.path.normpath(sys.argv[1])
schemes = sysconfig.get_scheme_names()
if prefix == "/usr/local" and "posix_local" in schemes:
    # Debian's default scheme: /usr/local/lib/python3.X/dist-packages
    path = sysconfig.get_path("platlib", "posix_local", vars={"platbase": "/usr", "base": "/usr"})
elif prefix == "/usr" and "deb_system" in schemes:
    path = sysconfig.get_path("platlib", "deb_system", vars={"platbase": "/usr", "base": "/usr"})
else:
    path = sysconfig.get_path("platlib", "posix_prefix", vars={"platbase": prefix, "base": prefix})
print(path)
