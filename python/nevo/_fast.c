/* nevo._fast: VecEnv.step's hot path as a CPython extension over numpy's C API.
 *
 * A ctypes call costs about a microsecond, as much as stepping 64 CartPoles, so step is
 * a C method of VecEnv's base type, VecStep: check the actions array, convert it to the
 * float32 actions C takes, call nevo_vec_env_step with the GIL released, return the outputs
 * (new arrays stepped into directly for copy=True; the vector's own for copy=False).
 * It links no libnevo: the package hands it nevo_vec_env_step's address from the
 * libnevo.so it loaded through ctypes, so every call goes to that one library. Anything
 * the fast checks do not take (lists, other dtypes, strides) goes through the package's
 * converter first, which also raises nevo.Error for what cannot be actions. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* nevo_vec_env_step (nevo/vec.h), with the vector and the error as opaque pointers */
typedef int (*StepFn)(void *v, const float *actions, float *obs, float *rewards, bool *terminated, bool *truncated,
                      float *final_obs, bool *has_final, void *err);

enum { OBS, REW, TERM, TRUNC, FINAL, HAS_FINAL, N_OUT };

typedef struct {
    PyObject_HEAD
    StepFn step;
    void *vec, *err;       /* NULL vec: closed */
    int busy;              /* a step is running (without the GIL): another step, reset or close refuses */
    int n, action_dim;     /* actions (n,) for discrete, (n, action_dim) for boxes */
    int discrete, copy, same_step;
    int obs_nd;            /* obs (n, *obs_shape) */
    npy_intp obs_dims[NPY_MAXDIMS];
    PyArrayObject *act;    /* (n, action_dim) float32: what C reads */
    PyArrayObject *out[N_OUT]; /* copy=False: the vector's buffers (FINAL, HAS_FINAL only in same_step) */
    PyObject *convert;     /* actions -> a C-contiguous ndarray of the right shape, or raises */
    PyObject *on_error;    /* status -> raises nevo.Error with the vector's message */
} VecStep;

static int vecstep_traverse(VecStep *s, visitproc visit, void *arg) {
    Py_VISIT(s->act);
    for (int i = 0; i < N_OUT; i++) Py_VISIT(s->out[i]);
    Py_VISIT(s->convert);
    Py_VISIT(s->on_error);
    return 0;
}

static int vecstep_clear(VecStep *s) {
    Py_CLEAR(s->act);
    for (int i = 0; i < N_OUT; i++) Py_CLEAR(s->out[i]);
    Py_CLEAR(s->convert);
    Py_CLEAR(s->on_error);
    return 0;
}

static void vecstep_dealloc(VecStep *s) {
    PyObject_GC_UnTrack(s);
    vecstep_clear(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* a: a native-order, aligned, C-contiguous array of the actions' shape? */
static int fast_shape(const VecStep *s, PyArrayObject *a) {
    if (!PyArray_ISCARRAY_RO(a) || !PyArray_ISNOTSWAPPED(a)) return 0;
    int nd = PyArray_NDIM(a);
    if (nd < 1 || nd > 2 || PyArray_DIM(a, 0) != s->n) return 0;
    if (s->discrete) return nd == 1 || PyArray_DIM(a, 1) == 1;
    return nd == 2 && PyArray_DIM(a, 1) == s->action_dim;
}

#define CONVERT(T)                                                   \
    do {                                                             \
        const T *p = (const T *)src;                                 \
        for (size_t i = 0; i < k; i++) dst[i] = (float)p[i];         \
    } while (0)

/* Writes a's values as floats into s->act (the C cast numpy's assignment makes; a bool
 * is 0 or 1 whatever its byte); 0 when a's dtype is not one the step takes (integers,
 * bools, floats; boxes: floats). Types by their C names: NPY_INT32 is NPY_LONG where
 * long has 32 bits. */
static int load_actions(VecStep *s, PyArrayObject *a) {
    float *dst = (float *)PyArray_DATA(s->act);
    const void *src = PyArray_DATA(a);
    size_t k = (size_t)s->n * (size_t)(s->discrete ? 1 : s->action_dim);
    int t = PyArray_TYPE(a);
    if (!s->discrete && t != NPY_FLOAT && t != NPY_DOUBLE) return 0;
    switch (t) {
    case NPY_FLOAT: memmove(dst, src, k * sizeof(float)); break; /* src may be act itself */
    case NPY_DOUBLE: CONVERT(double); break;
    case NPY_BOOL: {
        const npy_bool *p = (const npy_bool *)src;
        for (size_t i = 0; i < k; i++) dst[i] = p[i] != 0;
        break;
    }
    case NPY_BYTE: CONVERT(signed char); break;
    case NPY_UBYTE: CONVERT(unsigned char); break;
    case NPY_SHORT: CONVERT(short); break;
    case NPY_USHORT: CONVERT(unsigned short); break;
    case NPY_INT: CONVERT(int); break;
    case NPY_UINT: CONVERT(unsigned int); break;
    case NPY_LONG: CONVERT(long); break;
    case NPY_ULONG: CONVERT(unsigned long); break;
    case NPY_LONGLONG: CONVERT(long long); break;
    case NPY_ULONGLONG: CONVERT(unsigned long long); break;
    default: return 0;
    }
    return 1;
}

/* step(actions) -> (obs, rewards, terminated, truncated, infos) */
static int refuse_busy(const VecStep *s) {
    if (!s->busy) return 0;
    PyErr_SetString(PyExc_RuntimeError, "nevo: a step of this VecEnv is running in another thread (one thread at a time)");
    return -1;
}

static PyObject *vecstep_step(PyObject *self, PyObject *a) {
    VecStep *s = (VecStep *)self;
    if (!s->on_error) {
        PyErr_SetString(PyExc_RuntimeError, "nevo._fast: step before _set_step");
        return NULL;
    }
    if (refuse_busy(s)) return NULL;
    if (!s->vec) return PyObject_CallFunction(s->on_error, "i", -1);
    if (!PyArray_Check(a) || !fast_shape(s, (PyArrayObject *)a) || !load_actions(s, (PyArrayObject *)a)) {
        PyObject *c = PyObject_CallOneArg(s->convert, a);
        if (!c) return NULL;
        int ok = PyArray_Check(c) && fast_shape(s, (PyArrayObject *)c) && load_actions(s, (PyArrayObject *)c);
        Py_DECREF(c);
        if (!ok) {
            PyErr_SetString(PyExc_RuntimeError, "nevo._fast: the action converter returned what the step cannot take");
            return NULL;
        }
    }
    /* obs always goes to the vector's buffer, which keeps each instance's last
     * observation for a partial reset; copy=True returns a copy of it, and new arrays
     * stepped into for the rest */
    PyObject *out[N_OUT] = {0};
    int n_out = s->same_step ? N_OUT : FINAL;
    for (int i = 0; i < n_out; i++) {
        if (s->copy) {
            npy_intp n = s->n;
            int obs_like = i == OBS || i == FINAL;
            out[i] = PyArray_SimpleNew(obs_like ? s->obs_nd : 1, obs_like ? s->obs_dims : &n,
                                       i == OBS || i == REW || i == FINAL ? NPY_FLOAT32 : NPY_BOOL);
        } else {
            out[i] = (PyObject *)s->out[i];
            Py_INCREF(out[i]);
        }
        if (!out[i]) {
            for (int j = 0; j < i; j++) Py_DECREF(out[j]);
            return NULL;
        }
    }
    /* Python ran since the checks above (the converter, a collection in an allocation):
     * it may have closed the vector or started a step in another thread */
    void *vec = s->vec;
    if (!vec || s->busy) {
        for (int i = 0; i < n_out; i++) Py_DECREF(out[i]);
        return refuse_busy(s) ? NULL : PyObject_CallFunction(s->on_error, "i", -1);
    }
    float *obs = (float *)PyArray_DATA(s->out[OBS]), *obs_copy = (float *)PyArray_DATA((PyArrayObject *)out[OBS]);
    size_t obs_bytes = (size_t)PyArray_NBYTES(s->out[OBS]);
#define DATA(i) (out[i] ? PyArray_DATA((PyArrayObject *)out[i]) : NULL)
    int st;
    s->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    st = s->step(vec, (const float *)PyArray_DATA(s->act), obs, DATA(REW), DATA(TERM), DATA(TRUNC), DATA(FINAL),
                 DATA(HAS_FINAL), s->err);
    if (!st && obs_copy != obs) memcpy(obs_copy, obs, obs_bytes);
    Py_END_ALLOW_THREADS
    s->busy = 0;
#undef DATA
    PyObject *infos = st ? NULL : PyDict_New();
    PyObject *ret = infos ? PyTuple_New(5) : NULL;
    if (ret && s->same_step &&
        (PyDict_SetItemString(infos, "final_obs", out[FINAL]) || PyDict_SetItemString(infos, "_final_obs", out[HAS_FINAL])))
        Py_CLEAR(ret);
    if (!ret) {
        Py_XDECREF(infos);
        for (int i = 0; i < n_out; i++) Py_DECREF(out[i]);
        return st ? PyObject_CallFunction(s->on_error, "i", st) : NULL;
    }
    if (s->same_step) { /* the dict holds them */
        Py_DECREF(out[FINAL]);
        Py_DECREF(out[HAS_FINAL]);
    }
    for (int i = 0; i < 4; i++) PyTuple_SET_ITEM(ret, i, out[i]); /* steals */
    PyTuple_SET_ITEM(ret, 4, infos);
    return ret;
}

/* an array the step may write into: C-contiguous, native, writable, of this shape */
static int check_out(PyObject *o, int type, int nd, const npy_intp *dims, const char *what) {
    if (!PyArray_Check(o) || PyArray_TYPE((PyArrayObject *)o) != type || !PyArray_ISCARRAY((PyArrayObject *)o) ||
        PyArray_NDIM((PyArrayObject *)o) != nd ||
        memcmp(PyArray_DIMS((PyArrayObject *)o), dims, sizeof(npy_intp) * (size_t)nd)) {
        PyErr_Format(PyExc_ValueError, "nevo._fast: %s is not a C-contiguous array of the vector's shape", what);
        return -1;
    }
    return 0;
}

/* _set_step(step_addr, vec_addr, err_addr, n, action_dim, discrete, obs_shape, same_step,
 *           copy, act, outputs, convert, on_error), once; outputs: (obs, rewards,
 *           terminated, truncated, final_obs, has_final) arrays, the last two None
 *           unless same_step */
static PyObject *vecstep_set(PyObject *self, PyObject *args) {
    VecStep *s = (VecStep *)self;
    unsigned long long step, vec, err;
    int n, ad, discrete, same_step, copy;
    PyObject *obs_shape, *act, *outs, *convert, *on_error;
    if (!PyArg_ParseTuple(args, "KKKiipO!ppO!O!OO", &step, &vec, &err, &n, &ad, &discrete, &PyTuple_Type, &obs_shape,
                          &same_step, &copy, &PyArray_Type, &act, &PyTuple_Type, &outs, &convert, &on_error))
        return NULL;
    if (s->act) {
        PyErr_SetString(PyExc_RuntimeError, "nevo._fast: the step is set up once");
        return NULL;
    }
    if (!step || !vec || !err || n < 1 || ad < 1 || PyTuple_GET_SIZE(obs_shape) + 1 > NPY_MAXDIMS ||
        PyTuple_GET_SIZE(outs) != N_OUT || !PyCallable_Check(convert) || !PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_ValueError, "nevo._fast: bad arguments to _set_step");
        return NULL;
    }
    npy_intp obs_dims[NPY_MAXDIMS], act_dims[2] = {n, ad}, row[1] = {n};
    int obs_nd = 1 + (int)PyTuple_GET_SIZE(obs_shape);
    obs_dims[0] = n;
    for (int i = 1; i < obs_nd; i++) {
        obs_dims[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(obs_shape, i - 1));
        if (obs_dims[i] < 1) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "nevo._fast: bad observation shape");
            return NULL;
        }
    }
    if (check_out(act, NPY_FLOAT32, 2, act_dims, "act")) return NULL;
    static const char *const names[N_OUT] = {"obs", "rewards", "terminated", "truncated", "final_obs", "has_final"};
    for (int i = 0; i < N_OUT; i++) {
        PyObject *o = PyTuple_GET_ITEM(outs, i);
        int obs_like = i == OBS || i == FINAL;
        if (o == Py_None ? i < FINAL || same_step
                         : check_out(o, i == OBS || i == REW || i == FINAL ? NPY_FLOAT32 : NPY_BOOL,
                                     obs_like ? obs_nd : 1, obs_like ? obs_dims : row, names[i]) != 0) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "nevo._fast: the %s array is missing", names[i]);
            return NULL;
        }
    }
    s->step = (StepFn)(uintptr_t)step;
    s->vec = (void *)(uintptr_t)vec;
    s->err = (void *)(uintptr_t)err;
    s->n = n;
    s->action_dim = ad;
    s->discrete = discrete;
    s->same_step = same_step;
    s->copy = copy;
    s->obs_nd = obs_nd;
    memcpy(s->obs_dims, obs_dims, sizeof(npy_intp) * (size_t)obs_nd);
    s->act = (PyArrayObject *)act;
    Py_INCREF(act);
    for (int i = 0; i < N_OUT; i++) {
        PyObject *o = PyTuple_GET_ITEM(outs, i);
        if (o != Py_None) {
            s->out[i] = (PyArrayObject *)o;
            Py_INCREF(o);
        }
    }
    s->convert = convert;
    Py_INCREF(convert);
    s->on_error = on_error;
    Py_INCREF(on_error);
    Py_RETURN_NONE;
}

/* before the vector is freed: later steps call on_error(-1) (the package raises
 * "closed"); refused while a step runs */
static PyObject *vecstep_close(PyObject *self, PyObject *unused) {
    if (refuse_busy((VecStep *)self)) return NULL;
    ((VecStep *)self)->vec = NULL;
    Py_RETURN_NONE;
}

/* raises while a step runs (reset's check) */
static PyObject *vecstep_idle(PyObject *self, PyObject *unused) {
    if (refuse_busy((VecStep *)self)) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef vecstep_methods[] = {
    {"step", vecstep_step, METH_O,
     "step($self, actions, /)\n--\n\n"
     "(obs, rewards, terminated, truncated, infos): one step of every instance.\n"
     " actions: (num_envs,) integers for discrete actions, (num_envs, action_dim)\n"
     "floats for boxes (arrays of any integer, bool or float dtype, or lists). infos holds\n"
     "\"final_obs\" and \"_final_obs\" in same_step mode."},
    {"_set_step", vecstep_set, METH_VARARGS, "Sets the step up (VecEnv.__init__, once)."},
    {"_close_step", vecstep_close, METH_NOARGS, "Forgets the vector (about to be freed): later steps raise."},
    {"_step_idle", vecstep_idle, METH_NOARGS, "Raises RuntimeError while a step runs in another thread."},
    {NULL, NULL, 0, NULL},
};

/* VecEnv's base: the step's fields and methods; the Python class adds the rest */
static PyTypeObject VecStepType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nevo._fast.VecStep",
    .tp_basicsize = sizeof(VecStep),
    .tp_dealloc = (destructor)vecstep_dealloc,
    .tp_traverse = (traverseproc)vecstep_traverse,
    .tp_clear = (inquiry)vecstep_clear,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The step of a vector env (nevo.VecEnv's base).",
    .tp_methods = vecstep_methods,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fast(void) {
    import_array();
    if (PyType_Ready(&VecStepType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    Py_INCREF(&VecStepType);
    if (m && PyModule_AddObject(m, "VecStep", (PyObject *)&VecStepType) < 0) {
        Py_DECREF(&VecStepType);
        Py_CLEAR(m);
    }
    return m;
}
