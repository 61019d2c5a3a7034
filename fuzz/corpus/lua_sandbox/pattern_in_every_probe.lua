local t = setmetatable({}, {__index = function(t, k) return string.r2ep('x', 050) .. k end})
for i = 1, 10 do pcall(function() while true do local _ = d[i] end end) end
return string.find(string.rep('aÿÿÿsetmetatable(ÿÿÿÿÿ', 50), '.-.$b')
