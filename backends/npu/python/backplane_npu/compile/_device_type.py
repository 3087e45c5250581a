"""The device type the compile modules generate code for: this package is
backplane_<device>.compile, so a renamed copy (`backplane new-backend`) serves its own
device. Its own module, so that _inductor, _wrapper_codegen and _aoti import it and not
each other."""
DEVICE = __package__.partition(".")[0].removeprefix("backplane_")
