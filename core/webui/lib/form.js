// Forms whose inputs are named by the API's JSON paths
// ("connection.host", "data_points[0].address"), so a validation error
// from the API lands next to the field it names. Labels, aria-invalid and
// aria-describedby make each error reachable from the keyboard and
// screen readers; the first field in error takes the focus.

import {h} from './dom.js';

let seq = 0;

// field builds one labelled input. spec: {name, label, type ('text',
// 'number', 'password', 'select', 'checkbox', 'textarea'), value,
// options ([value, label] pairs for select), required, min, max, step,
// placeholder, help, autocomplete}.
export function field(spec) {
  const id = `f${++seq}`;
  const errId = `${id}-err`;
  const helpId = spec.help ? `${id}-help` : null;
  let input;
  const common = {id, name: spec.name, 'data-input': spec.name, required: !!spec.required,
    'aria-describedby': [helpId, errId].filter(Boolean).join(' ')};
  if (spec.type === 'select') {
    input = h('select', common, (spec.options || []).map(([v, l]) =>
      h('option', {value: v, selected: String(spec.value ?? '') === String(v), text: l ?? v})));
  } else if (spec.type === 'textarea') {
    input = h('textarea', {...common, rows: spec.rows || 6, placeholder: spec.placeholder, spellcheck: 'false'});
    input.value = spec.value ?? '';
  } else if (spec.type === 'checkbox') {
    input = h('input', {...common, type: 'checkbox', checked: !!spec.value});
  } else {
    input = h('input', {...common, type: spec.type || 'text', value: spec.value ?? '', min: spec.min, max: spec.max,
      step: spec.step, placeholder: spec.placeholder, autocomplete: spec.autocomplete || 'off'});
  }
  const wrap = h('div', {class: `field${spec.type === 'checkbox' ? ' check' : ''}`, 'data-field': spec.name},
    spec.type === 'checkbox' ? [input, h('label', {for: id, text: spec.label})] : [h('label', {for: id, text: spec.label}), input],
    spec.help ? h('small', {id: helpId, class: 'help', text: spec.help}) : null,
    h('small', {id: errId, class: 'field-error', role: 'alert', hidden: true}));
  return wrap;
}

// values reads a form's inputs into an object: dotted and indexed names
// build nested objects and arrays; number inputs become numbers (empty
// ones are left out), checkboxes booleans.
export function values(form) {
  const out = {};
  for (const el of form.querySelectorAll('[data-input]')) {
    if (el.disabled) continue;
    let v;
    if (el.type === 'checkbox') v = el.checked;
    else if (el.type === 'number') {
      if (el.value === '') continue;
      v = Number(el.value);
    } else v = el.value;
    setPath(out, el.dataset.input, v);
  }
  return out;
}

function setPath(obj, path, v) {
  const keys = path.replace(/\[(\d+)\]/g, '.$1').split('.');
  let cur = obj;
  keys.forEach((k, i) => {
    if (i === keys.length - 1) {
      cur[k] = v;
      return;
    }
    if (cur[k] === undefined) cur[k] = /^\d+$/.test(keys[i + 1]) ? [] : {};
    cur = cur[k];
  });
}

// clearErrors removes every error shown on form.
export function clearErrors(form) {
  for (const w of form.querySelectorAll('.field.invalid')) {
    w.classList.remove('invalid');
    const input = w.querySelector('[data-input]');
    if (input) input.removeAttribute('aria-invalid');
    const e = w.querySelector('.field-error');
    e.hidden = true;
    e.textContent = '';
  }
  const alert = form.querySelector('.form-error');
  if (alert) alert.remove();
}

// showErrors puts each {field, message} next to the field it names, or
// the nearest enclosing one (data_points[0].address falls back to
// data_points[0], then data_points); what names no field goes in one
// alert at the top of the form. The first field in error is focused.
export function showErrors(form, errors, fallback = 'The request failed.') {
  clearErrors(form);
  const loose = [];
  let first = null;
  for (const {field: name, message} of errors) {
    const w = name ? findField(form, name) : null;
    if (!w) {
      loose.push(name ? `${name}: ${message}` : message);
      continue;
    }
    w.classList.add('invalid');
    const input = w.querySelector('[data-input]');
    if (input) input.setAttribute('aria-invalid', 'true');
    const e = w.querySelector('.field-error');
    e.textContent = e.textContent ? `${e.textContent}; ${message}` : message;
    e.hidden = false;
    if (!first) first = input || w;
  }
  if (loose.length || !errors.length) {
    form.prepend(h('div', {class: 'alert error form-error', role: 'alert', text: loose.join('; ') || fallback}));
  }
  if (first) first.focus();
}

function findField(form, name) {
  let n = name;
  for (;;) {
    const w = form.querySelector(`.field[data-field="${CSS.escape(n)}"]`);
    if (w) return w;
    const cut = Math.max(n.lastIndexOf('.'), n.lastIndexOf('['));
    if (cut <= 0) return null;
    n = n.slice(0, cut);
  }
}

// submitting disables form's buttons while fn runs, and shows an
// ApiError's field errors on the form.
export async function submitting(form, fn) {
  const buttons = [...form.querySelectorAll('button')];
  buttons.forEach(b => { b.disabled = true; });
  clearErrors(form);
  try {
    return await fn();
  } catch (err) {
    showErrors(form, err.fields || [{field: '', message: err.message}], err.message);
    return undefined;
  } finally {
    buttons.forEach(b => { b.disabled = false; });
  }
}
